//===- Regex.cpp - PCRE2 patterns -----------------------------------------===//
#include "Regex.h"
#include "Tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace spark::text {

Regex::Regex(const std::string &pattern, const std::string &where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code *compiled = pcre2_compile(
      reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
      PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!compiled) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw TextError(where + ": the regular expression does not compile at " +
                    "offset " + std::to_string(offset) + ": " +
                    reinterpret_cast<char *>(message));
  }
  // JIT is an optimisation: a platform without it still matches.
  (void)pcre2_jit_compile(compiled, PCRE2_JIT_COMPLETE);
  code = compiled;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code *>(code)); }

std::vector<std::pair<size_t, size_t>>
Regex::findAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto *re = static_cast<pcre2_code *>(code);
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, nullptr);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    // The text layer only matches valid UTF-8 (input is repaired first).
    int rc = pcre2_match(re, subject, text.size(), start, PCRE2_NO_UTF_CHECK,
                         md, nullptr);
    if (rc < 0)
      break;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    if (e == b) {
      // Empty match: step over one character.
      if (b >= text.size())
        break;
      size_t next = b + 1;
      while (next < text.size() &&
             (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80)
        ++next;
      start = next;
      continue;
    }
    out.emplace_back(b, e);
    start = e;
  }
  pcre2_match_data_free(md);
  return out;
}

} // namespace spark::text
