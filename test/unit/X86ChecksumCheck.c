/* X86ChecksumCheck.c - the x86 block digests of checksum_x86.h, compiled as
 * C, as runtime.c compiles them, for X86ChecksumTest.cpp (GCC 12 warns of
 * its own intrinsics' undefined vectors in C++). */
#include "checksum_x86.h"

uint64_t spark_check_digest_avx512(const void *data, size_t bytes,
                                   uint64_t index) {
  return spark_checksum_block_avx512(data, bytes, index);
}

uint64_t spark_check_digest_avx2(const void *data, size_t bytes,
                                 uint64_t index) {
  return spark_checksum_block_avx2(data, bytes, index);
}
