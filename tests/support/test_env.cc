#include "support/test_env.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "src/base/log.h"

namespace ringcc::test {

ScopedEnv::ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
  if (const char* old = std::getenv(name)) saved_ = old;
  if (value)
    setenv(name, value->c_str(), 1);
  else
    unsetenv(name);
}

ScopedEnv::~ScopedEnv() {
  if (saved_)
    setenv(name_.c_str(), saved_->c_str(), 1);
  else
    unsetenv(name_.c_str());
}

CapturedLog::CapturedLog() {
  char tmpl[] = "/tmp/ringcc-log-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd >= 0) close(fd);
  path_ = tmpl;
  debug_.emplace("NCCL_DEBUG", "WARN");
  file_.emplace("NCCL_DEBUG_FILE", path_);
  resetLogging();
}

CapturedLog::~CapturedLog() {
  debug_.reset();
  file_.reset();
  resetLogging();
  unlink(path_.c_str());
}

std::string CapturedLog::text() const {
  std::ifstream in(path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ringcc::test
