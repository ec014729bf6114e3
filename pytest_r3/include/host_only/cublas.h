/* pytest-r3: <cublas.h>, declarations only (see cublas_api.h) */
#include "cublas_api.h"
