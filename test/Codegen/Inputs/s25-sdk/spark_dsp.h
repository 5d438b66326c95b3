/* Stand-in for the spark_dsp.h the Hexagon SDK's qaic writes from
 * spark_dsp.idl, with only what spark_dsp_imp.c uses (the handle type and
 * the AEE error codes), so that target-s25.test can check that the bundle's
 * DSP-side source compiles against the part's header and the runtime's. */
#include <stdint.h>

typedef uint64_t remote_handle64;

#define AEE_SUCCESS 0
#define AEE_EFAILED 1
#define AEE_ENOMEMORY 2
#define AEE_EBADPARM 14
