/* hexagon_lanes_test.c - the HVX lane conversions of Hexagon's vrmpy rows
 * (targets/hexagon/lib/vrmpy_linear.c, included for its static functions),
 * run under qemu-hexagon-static by test_cross.py:
 *   float_bits: int32 lanes to f32 as (float)v rounds them (to nearest
 *   even past 24 bits), for powers of two and their neighbours, ties and
 *   random values of every magnitude, both signs, and (`small`) the same
 *   shifted below 2^24;
 *   half_bits: every finite f16 value to f32, exactly (the value computed
 *   from the f16 fields), with the vector load and with the copy a buffer's
 *   end takes.
 * Prints the count of values checked and of mismatches; exits 1 on any. */
#include "vrmpy_linear.c"

#include <stdio.h>
#include <string.h>

static uint32_t state = 99;
static uint32_t next_random(void) {
  state = state * 1664525u + 1013904223u;
  return state;
}

/* An f16 value from its fields (finite). */
static float half_value(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const float v = e ? (1.0f + m / 1024.0f) * spark_pow2f(e - 15)
                    : m / 1024.0f * spark_pow2f(-14);
  return h & 0x8000 ? -v : v;
}

static int same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

int main(void) {
  long checked = 0, mismatches = 0;
  int32_t v[32] __attribute__((aligned(128)));
  for (int round = 0; round < 20000; ++round) {
    for (int i = 0; i < 32; ++i) {
      int32_t x;
      const int e = 24 + (int)(next_random() % 7);
      switch (i % 4) {
      case 0: /* any magnitude */
        x = (int32_t)(next_random() >> (next_random() % 32));
        break;
      case 1: /* a power of two and its neighbours */
        x = (1 << (next_random() % 31)) + (int32_t)(next_random() % 5) - 2;
        break;
      case 2: /* a tie: e bits, the dropped ones exactly half */
        x = (int32_t)(((next_random() >> (32 - e)) | (1u << (e - 1))) &
                      ~((1u << (e - 24)) - 1)) +
            (1 << (e - 25));
        break;
      default:
        x = (int32_t)(next_random() & 0x7fffffffu);
        break;
      }
      v[i] = next_random() & 1 ? -x : x;
    }
    const lane_floats f = {float_bits(*(const hvx_vector *)v, 0)};
    for (int i = 0; i < 32; ++i, ++checked)
      if (!same((float)v[i], f.value[i]) && mismatches++ < 5)
        printf("float_bits(%ld) is wrong\n", (long)v[i]);
    /* the same below 2^24, without rounding */
    for (int i = 0; i < 32; ++i)
      v[i] = v[i] < 0 ? -(-v[i] >> 7) : v[i] >> 7;
    const lane_floats g = {float_bits(*(const hvx_vector *)v, 1)};
    for (int i = 0; i < 32; ++i, ++checked)
      if (!same((float)v[i], g.value[i]) && mismatches++ < 5)
        printf("float_bits(%ld, small) is wrong\n", (long)v[i]);
  }
  uint16_t h[64] __attribute__((aligned(128)));
  for (uint32_t base = 0; base < 0x10000; base += 32) {
    for (int i = 0; i < 32; ++i)
      h[i] = (uint16_t)(base + i);
    const lane_floats loaded = {half_bits(h, h + 64)};
    const lane_floats copied = {half_bits(h, h + 32)};
    for (int i = 0; i < 32; ++i) {
      if ((h[i] & 0x7c00) == 0x7c00) /* infinity, NaN */
        continue;
      ++checked;
      const float want = half_value(h[i]);
      if ((!same(want, loaded.value[i]) || !same(want, copied.value[i])) &&
          mismatches++ < 10)
        printf("half_bits(0x%x) is wrong\n", h[i]);
    }
  }
  printf("%ld values, %ld mismatches\n", checked, mismatches);
  return mismatches != 0;
}
