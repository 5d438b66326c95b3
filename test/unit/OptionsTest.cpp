//===- OptionsTest.cpp - the tools' option parser (options.h) -------------===//
#include "options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

struct Parsed {
  int status;
  std::vector<std::string> positionals;
  std::string message;
};

/// Parses `args` (argv[0] added) against `table`, at most `max` positionals.
Parsed parse(std::vector<std::string> args, spark_option *table, size_t count,
             size_t max = 1) {
  args.insert(args.begin(), "tool");
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  std::vector<const char *> found(max + 1, nullptr);
  size_t n = 99;
  char message[256] = "";
  Parsed p;
  p.status =
      spark_options_parse(int(argv.size()), argv.data(), table, count,
                          found.data(), max, &n, message, sizeof(message));
  for (size_t i = 0; i < n && i < max; ++i)
    p.positionals.push_back(found[i]);
  p.message = message;
  return p;
}

TEST(Options, ValuesFlagsAndPositionals) {
  spark_option table[] = {{"threads", 1, nullptr},
                          {"pack", 1, nullptr},
                          {"quiet", 0, nullptr},
                          {"help", 0, nullptr}};
  std::vector<std::string> args = {"--threads", "2", "out", "--pack=a=b",
                                   "--quiet"};
  Parsed p = parse(args, table, 4);
  ASSERT_EQ(p.status, 0) << p.message;
  EXPECT_EQ(p.positionals, std::vector<std::string>{"out"});
  EXPECT_STREQ(table[0].value, "2");
  EXPECT_STREQ(table[1].value, "a=b"); // only the first '=' splits
  EXPECT_STREQ(table[2].value, "");
  EXPECT_EQ(table[3].value, nullptr);
  EXPECT_EQ(spark_option_find(table, 4, "pack"), &table[1]);
  EXPECT_EQ(spark_option_find(table, 4, "pac"), nullptr);
}

TEST(Options, TheLastValueCounts) {
  spark_option table[] = {{"seed", 1, nullptr}};
  ASSERT_EQ(parse({"--seed", "1", "--seed=7"}, table, 1).status, 0);
  EXPECT_STREQ(table[0].value, "7");
}

TEST(Options, ErrorsNameTheArgument) {
  spark_option table[] = {{"threads", 1, nullptr}, {"quiet", 0, nullptr}};
  struct Case {
    std::vector<std::string> args;
    const char *message;
  } cases[] = {
      {{"--thread", "2"}, "unknown option --thread"},
      {{"--threadsx=2"}, "unknown option --threadsx"},
      {{"--threads"}, "--threads needs a value"},
      {{"--quiet=1"}, "--quiet takes no value"},
      {{"a", "b"}, "unexpected argument 'b'"},
  };
  for (const Case &c : cases) {
    for (spark_option &o : table)
      o.value = nullptr;
    Parsed p = parse(c.args, table, 2);
    EXPECT_EQ(p.status, -1) << c.message;
    EXPECT_EQ(p.message, c.message);
  }
}

TEST(Options, DoubleDashAloneIsPositional) {
  spark_option table[] = {{"quiet", 0, nullptr}};
  Parsed p = parse({"--", "-x"}, table, 1, 2);
  ASSERT_EQ(p.status, 0) << p.message;
  EXPECT_EQ(p.positionals, (std::vector<std::string>{"--", "-x"}));
}

TEST(Options, Numbers) {
  char message[128] = "";
  long long i = 0;
  double d = 0;
  spark_option given = {"n", 1, "-12"}, absent = {"n", 1, nullptr};
  EXPECT_EQ(spark_option_int(&given, 5, &i, message, sizeof(message)), 0);
  EXPECT_EQ(i, -12);
  EXPECT_EQ(spark_option_int(&absent, 5, &i, message, sizeof(message)), 0);
  EXPECT_EQ(i, 5);
  EXPECT_EQ(spark_option_int(nullptr, 6, &i, message, sizeof(message)), 0);
  EXPECT_EQ(i, 6);
  for (const char *bad : {"", "1.5", "12x", "99999999999999999999"}) {
    spark_option o = {"n", 1, bad};
    EXPECT_EQ(spark_option_int(&o, 5, &i, message, sizeof(message)), -1);
    EXPECT_EQ(std::string(message),
              std::string("--n: '") + bad + "' is not an integer");
  }
  spark_option real = {"t", 1, "0.25"};
  EXPECT_EQ(spark_option_double(&real, 1, &d, message, sizeof(message)), 0);
  EXPECT_EQ(d, 0.25);
  for (const char *bad : {"", "warm", "1e"}) {
    spark_option o = {"t", 1, bad};
    EXPECT_EQ(spark_option_double(&o, 1, &d, message, sizeof(message)), -1);
    EXPECT_EQ(std::string(message),
              std::string("--t: '") + bad + "' is not a number");
  }
}

} // namespace
