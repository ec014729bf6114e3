/* pytest-r3: <nvtx3/nvToolsExt.h>, declarations only (see ../nvToolsExt.h) */
#include "../nvToolsExt.h"
