// Test helpers shared by the suite: scoped environment variables and a captured log file.
#pragma once

#include <optional>
#include <string>

namespace ringcc::test {

// Sets (or, with nullopt, unsets) an environment variable for the scope's lifetime.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> saved_;
};

// Sends this process's log (at WARN) to a fresh temporary file for the scope's lifetime.
class CapturedLog {
 public:
  CapturedLog();
  ~CapturedLog();
  std::string text() const;  // everything logged so far
  bool contains(const std::string& needle) const { return text().find(needle) != std::string::npos; }

 private:
  std::string path_;
  std::optional<ScopedEnv> debug_, file_;
};

}  // namespace ringcc::test

// Runs `call` (in a Catch2 test), expects `code`, and expects the WARN log to mention `needle`.
#define EXPECT_REFUSED(call, code, needle)       \
  do {                                           \
    ::ringcc::test::CapturedLog log_;            \
    CHECK((call) == (code));                     \
    INFO("log: " << log_.text());                \
    CHECK(log_.contains(needle));                \
  } while (0)
