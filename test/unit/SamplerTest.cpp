//===- SamplerTest.cpp - spark_sampler against its definition -------------===//
//
// spark_sampler_sample sorts only the buckets of probability it needs
// (runtime.c). Here it is checked against the definition written the plain
// way: every token's probability, all of them sorted (descending, ties lower
// id first), top_k and top_p cut the sorted list, and the draw u (the
// sampler's splitmix64 stream from the seed, times the kept mass) walks it.
// The two sum the kept mass in different orders, so they may differ when u
// lies within rounding of a boundary; the cases here are fixed, and every
// draw must agree.
//
//===----------------------------------------------------------------------===//

#include "spark/runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace {

uint64_t nextRandom(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// The definition: `draws` tokens from `logits` with `params`.
std::vector<int32_t> referenceDraws(const std::vector<float> &logits,
                                    const spark_sampler_params &params,
                                    int draws) {
  const int32_t vocab = int32_t(logits.size());
  uint64_t state = params.seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  int32_t best = -1;
  for (int32_t i = 0; i < vocab; ++i)
    if (logits[size_t(i)] != -INFINITY &&
        (best < 0 || logits[size_t(i)] > logits[size_t(best)]))
      best = i;
  std::vector<float> probs(logits.size());
  double total = 0;
  for (int32_t i = 0; i < vocab; ++i) {
    probs[size_t(i)] = std::exp((logits[size_t(i)] - logits[size_t(best)]) /
                                params.temperature);
    total += probs[size_t(i)];
  }
  for (float &p : probs)
    p = float(p / total);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return probs[size_t(a)] > probs[size_t(b)];
  });
  int32_t keep =
      params.top_k > 0 && params.top_k < vocab ? params.top_k : vocab;
  double mass = 0;
  for (int32_t i = 0; i < keep; ++i) {
    mass += probs[size_t(order[size_t(i)])];
    if (mass >= params.top_p) {
      keep = i + 1;
      break;
    }
  }
  double kept = 0;
  for (int32_t i = 0; i < keep; ++i)
    kept += probs[size_t(order[size_t(i)])];
  std::vector<int32_t> tokens;
  for (int d = 0; d < draws; ++d) {
    double u = double(nextRandom(state) >> 11) * 0x1.0p-53 * kept;
    int32_t token = order[size_t(keep - 1)];
    for (int32_t i = 0; i < keep; ++i) {
      u -= probs[size_t(order[size_t(i)])];
      if (u < 0) {
        token = order[size_t(i)];
        break;
      }
    }
    tokens.push_back(token);
  }
  return tokens;
}

std::vector<int32_t> samplerDraws(const std::vector<float> &logits,
                                  const spark_sampler_params &params,
                                  int draws) {
  spark_sampler *sampler = nullptr;
  EXPECT_EQ(spark_sampler_create(&params, int32_t(logits.size()), &sampler),
            SPARK_OK);
  std::vector<int32_t> tokens;
  for (int d = 0; d < draws && sampler; ++d) {
    int32_t token = -1;
    EXPECT_EQ(spark_sampler_sample(sampler, logits.data(), &token), SPARK_OK);
    tokens.push_back(token);
  }
  spark_sampler_destroy(sampler);
  return tokens;
}

/// Rows of logits of several shapes, `vocab` long.
std::vector<std::vector<float>> rows(int32_t vocab) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> flat(-5.0f, 5.0f);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<std::vector<float>> out;
  std::vector<float> row(size_t(vocab), 0.0f);
  for (float &x : row) // nearly flat: most tokens matter
    x = flat(gen);
  out.push_back(row);
  for (float &x : row) // a language model's: a few tokens stand out
    x = normal(gen);
  for (int i = 0; i < 5; ++i)
    row[size_t(gen() % uint32_t(vocab))] += 12.0f;
  out.push_back(row);
  for (float &x : row) // few distinct values: long runs of ties
    x = float(gen() % 4);
  out.push_back(row);
  for (int32_t i = 0; i < vocab; ++i) // half masked, the rest spread wide
    row[size_t(i)] = i % 2 ? -INFINITY : float(gen() % 400) * -0.5f;
  out.push_back(row);
  return out;
}

void expectSame(int32_t vocab, int draws) {
  const float temperatures[] = {0.3f, 1.0f, 1.7f};
  const int32_t topKs[] = {0, 1, 3, 40, vocab};
  const float topPs[] = {1.0f, 0.95f, 0.5f, 0.05f};
  int row = 0;
  for (const std::vector<float> &logits : rows(vocab)) {
    for (float temperature : temperatures)
      for (int32_t topK : topKs)
        for (float topP : topPs) {
          spark_sampler_params params = spark_sampler_params_default();
          params.temperature = temperature;
          params.top_k = topK;
          params.top_p = topP;
          params.seed = uint64_t(row * 1000 + topK);
          EXPECT_EQ(samplerDraws(logits, params, draws),
                    referenceDraws(logits, params, draws))
              << "row " << row << ", temperature " << temperature << ", top_k "
              << topK << ", top_p " << topP;
        }
    ++row;
  }
}

TEST(Sampler, SmallVocabularyMatchesTheDefinition) { expectSame(7, 200); }

TEST(Sampler, MidVocabularyMatchesTheDefinition) { expectSame(4096, 40); }

TEST(Sampler, SparkVocabularyMatchesTheDefinition) { expectSame(131072, 3); }

} // namespace
