/* Stand-in for the Hexagon SDK's HAP_farf.h (see spark_dsp.h here). */
#define FARF(level, format, ...) ((void)sizeof(format))
