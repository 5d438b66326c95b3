//===- Regex.h - PCRE2 patterns of tokenizer files and chat templates -----===//
#ifndef SPARK_TEXT_REGEX_H
#define SPARK_TEXT_REGEX_H

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spark::text {

/// A compiled UTF-8 pattern (PCRE2 with UTF and UCP, JIT-compiled when the
/// platform allows). Thread-safe: match data is per call.
class Regex {
public:
  /// Throws TextError naming `where` when the pattern does not compile.
  Regex(const std::string &pattern, const std::string &where);
  ~Regex();
  Regex(const Regex &) = delete;
  Regex &operator=(const Regex &) = delete;

  /// Every non-overlapping match in `text` as [begin, end) byte offsets;
  /// an empty match advances by one character.
  std::vector<std::pair<size_t, size_t>> findAll(std::string_view text) const;

private:
  void *code = nullptr; // pcre2_code_8
};

} // namespace spark::text

#endif // SPARK_TEXT_REGEX_H
