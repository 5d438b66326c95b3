/* pack_format.h - the weight pack file (model.spkw), shared by the writer
 * (spark-compile) and the reader (runtime). docs/pack-format.md describes it.
 *
 * Layout: a header, a tensor table, then tensor data. Every tensor starts at
 * a multiple of SPARK_PACK_ALIGNMENT from the start of the file, so an mmap'd
 * pack gives kernels aligned pointers with no copy. All integers are little
 * endian. */
#ifndef SPARK_PACK_FORMAT_H
#define SPARK_PACK_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPARK_PACK_MAGIC "SPKWPACK"
#define SPARK_PACK_VERSION 1u
#define SPARK_PACK_ALIGNMENT 4096u
#define SPARK_PACK_NAME_BYTES 96
#define SPARK_PACK_TARGET_BYTES 32

typedef struct spark_pack_header {
  char magic[8];          /* SPARK_PACK_MAGIC, no terminator */
  uint32_t version;       /* SPARK_PACK_VERSION */
  uint32_t header_bytes;  /* sizeof(spark_pack_header) */
  uint64_t abi_hash;      /* equals the model library's */
  uint64_t config_hash;   /* equals the model library's */
  char target[SPARK_PACK_TARGET_BYTES]; /* NUL-terminated */
  uint64_t tensor_count;
  uint64_t table_offset;  /* of tensor_count spark_pack_entry */
  uint64_t file_bytes;    /* total size; a shorter file is truncated */
  uint64_t table_checksum; /* spark_checksum of the table */
} spark_pack_header;

typedef struct spark_pack_entry {
  char name[SPARK_PACK_NAME_BYTES]; /* NUL-terminated */
  uint32_t dtype;   /* spark_dtype */
  uint32_t layout;  /* spark_layout */
  uint64_t offset;  /* from the start of the file, aligned */
  uint64_t bytes;
  uint64_t checksum; /* spark_checksum of the bytes */
  uint32_t rank;
  uint32_t reserved;
  int64_t shape[4];
} spark_pack_entry;

/* A fast 64-bit checksum: four independent multiply-xor lanes over 8-byte
 * words (streams at several GB/s), the tail folded in bytewise. It can be
 * computed in pieces: every update() but the last must cover a multiple of
 * 32 bytes. */
typedef struct spark_checksum_state {
  uint64_t lane[4];
  uint64_t bytes;
  uint64_t tail;
} spark_checksum_state;

static inline void spark_checksum_init(spark_checksum_state *s) {
  s->lane[0] = 1;
  s->lane[1] = 2;
  s->lane[2] = 3;
  s->lane[3] = 4;
  s->bytes = 0;
  s->tail = 0xcbf29ce484222325ull;
}

static inline void spark_checksum_update(spark_checksum_state *s,
                                         const void *data, size_t bytes) {
  const unsigned char *p = (const unsigned char *)data;
  const uint64_t k = 0x9e3779b97f4a7c15ull;
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      memcpy(&w, p + i + 8 * l, 8);
      s->lane[l] = (s->lane[l] ^ w) * k;
      s->lane[l] ^= s->lane[l] >> 29;
    }
  }
  for (; i < bytes; ++i)
    s->tail = (s->tail ^ p[i]) * 0x100000001b3ull;
  s->bytes += bytes;
}

static inline uint64_t spark_checksum_final(const spark_checksum_state *s) {
  const uint64_t k = 0x9e3779b97f4a7c15ull;
  uint64_t h = s->bytes * k;
  for (int l = 0; l < 4; ++l)
    h = (h ^ s->lane[l]) * k;
  h = (h ^ s->tail) * k;
  return h ^ (h >> 31);
}

static inline uint64_t spark_checksum(const void *data, size_t bytes) {
  spark_checksum_state s;
  spark_checksum_init(&s);
  spark_checksum_update(&s, data, bytes);
  return spark_checksum_final(&s);
}

#ifdef __cplusplus
}
#endif

#endif /* SPARK_PACK_FORMAT_H */
