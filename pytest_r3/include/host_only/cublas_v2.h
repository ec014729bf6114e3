/* pytest-r3: <cublas_v2.h>, declarations only (see cublas_api.h) */
#include "cublas_api.h"
