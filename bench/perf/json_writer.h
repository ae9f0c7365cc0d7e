// A small streaming JSON writer (objects, lists, strings, numbers), enough for the -J results
// file; it tracks commas itself so callers emit values in order.
//
// Layout choices follow nccl-tests' JSON (version 2): booleans are written as the strings
// "true"/"false" and non-finite numbers as strings ("nan", "inf"), numbers with %f.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringcc::bench {

class JsonWriter {
 public:
  const std::string& text() const { return out_; }

  void beginObject();
  void endObject();
  void beginList();
  void endList();
  void key(const std::string& name);  // inside an object, before its value
  void str(const std::string& value);
  void integer(int64_t value);
  void number(double value);
  void boolean(bool value);
  void null();
  // Closes every open list and object.
  void closeAll();
  int depth() const { return static_cast<int>(stack_.size()); }

 private:
  enum class State { Key, ObjectEmpty, ObjectSome, ListEmpty, ListSome };
  void beforeValue();
  static std::string quote(const std::string& s);

  std::string out_;
  std::vector<State> stack_;
};

}  // namespace ringcc::bench
