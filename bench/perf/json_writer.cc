#include "bench/perf/json_writer.h"

#include <cmath>
#include <cstdio>

namespace ringcc::bench {

void JsonWriter::beforeValue() {
  if (stack_.empty()) return;
  switch (stack_.back()) {
    case State::Key: stack_.pop_back(); break;
    case State::ListEmpty: stack_.back() = State::ListSome; break;
    case State::ListSome: out_ += ','; break;
    default: break;  // a value straight inside an object is a caller bug; keep the text going
  }
}

void JsonWriter::beginObject() {
  beforeValue();
  out_ += '{';
  stack_.push_back(State::ObjectEmpty);
}

void JsonWriter::endObject() {
  if (!stack_.empty() && stack_.back() == State::Key) null();
  if (!stack_.empty()) stack_.pop_back();
  out_ += '}';
}

void JsonWriter::beginList() {
  beforeValue();
  out_ += '[';
  stack_.push_back(State::ListEmpty);
}

void JsonWriter::endList() {
  if (!stack_.empty()) stack_.pop_back();
  out_ += ']';
}

void JsonWriter::key(const std::string& name) {
  if (!stack_.empty() && stack_.back() == State::ObjectSome) out_ += ',';
  if (!stack_.empty() && stack_.back() == State::ObjectEmpty) stack_.back() = State::ObjectSome;
  out_ += quote(name);
  out_ += ':';
  stack_.push_back(State::Key);
}

void JsonWriter::str(const std::string& value) {
  beforeValue();
  out_ += quote(value);
}

void JsonWriter::integer(int64_t value) {
  beforeValue();
  out_ += std::to_string(value);
}

void JsonWriter::number(double value) {
  if (!std::isfinite(value)) {
    str(std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf"));
    return;
  }
  beforeValue();
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%f", value);
  out_ += buf;
}

void JsonWriter::boolean(bool value) { str(value ? "true" : "false"); }

void JsonWriter::null() {
  beforeValue();
  out_ += "null";
}

void JsonWriter::closeAll() {
  while (!stack_.empty()) {
    switch (stack_.back()) {
      case State::Key: null(); break;
      case State::ObjectEmpty:
      case State::ObjectSome: endObject(); break;
      default: endList(); break;
    }
  }
}

std::string JsonWriter::quote(const std::string& s) {
  std::string q = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': q += "\\\""; break;
      case '\\': q += "\\\\"; break;
      case '\n': q += "\\n"; break;
      case '\t': q += "\\t"; break;
      case '\r': q += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          q += buf;
        } else {
          q += static_cast<char>(c);
        }
    }
  }
  return q + "\"";
}

}  // namespace ringcc::bench
