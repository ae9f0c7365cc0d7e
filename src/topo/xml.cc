#include "src/topo/xml.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "src/base/error.h"

namespace ringcc {

const std::string* XmlNode::attr(std::string_view key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}

std::string XmlNode::attrOr(std::string_view key, std::string_view fallback) const {
  const std::string* v = attr(key);
  return v ? *v : std::string(fallback);
}

void XmlNode::set(std::string_view key, std::string_view value) {
  for (auto& [k, v] : attrs)
    if (k == key) {
      v = value;
      return;
    }
  attrs.emplace_back(std::string(key), std::string(value));
}

XmlNode& XmlNode::add(std::string_view childName) {
  subs.emplace_back();
  subs.back().name = childName;
  return subs.back();
}

namespace {

// A cursor over the text that counts lines and remembers the first error.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool parseDocument(XmlNode* root) {
    skipMisc();
    if (!ok_) return false;
    if (atEnd()) return error("no element: the file is empty");
    if (!parseElement(root, 1)) return false;
    skipMisc();
    if (!ok_) return false;
    if (!atEnd()) return error("text after the end of <" + root->name + ">");
    return true;
  }

  const std::string& message() const { return message_; }

 private:
  bool atEnd() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool startsWith(std::string_view s) const { return text_.substr(pos_).starts_with(s); }
  void advance(size_t n = 1) {
    for (size_t i = 0; i < n && pos_ < text_.size(); ++i, ++pos_)
      if (text_[pos_] == '\n') ++line_;
  }
  static bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  static bool isNameChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.' || c == ':';
  }
  void skipSpace() {
    while (!atEnd() && isSpace(peek())) advance();
  }

  bool error(const std::string& what) {
    if (ok_) message_ = "line " + std::to_string(line_) + ": " + what;
    ok_ = false;
    return false;
  }

  // Whitespace, comments and <?...?> declarations between elements.
  void skipMisc() {
    for (;;) {
      skipSpace();
      if (startsWith("<!--")) {
        const int start = line_;
        size_t end = text_.find("-->", pos_ + 4);
        if (end == std::string_view::npos) {
          line_ = start;
          error("comment never closed (no -->)");
          return;
        }
        advance(end + 3 - pos_);
      } else if (startsWith("<?")) {
        size_t end = text_.find("?>", pos_ + 2);
        if (end == std::string_view::npos) {
          error("<? declaration never closed (no ?>)");
          return;
        }
        advance(end + 2 - pos_);
      } else {
        return;
      }
    }
  }

  bool parseName(std::string* out, const char* what) {
    size_t start = pos_;
    while (!atEnd() && isNameChar(peek())) advance();
    if (pos_ == start) {
      if (atEnd()) return error(std::string("end of file where ") + what + " was expected");
      return error(std::string("expected ") + what + ", found '" + printable(peek()) + "'");
    }
    if (pos_ - start > kXmlMaxToken) return error(std::string(what) + " too long");
    *out = std::string(text_.substr(start, pos_ - start));
    return true;
  }

  static std::string printable(char c) {
    if (c >= 0x20 && c < 0x7f) return std::string(1, c);
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(c));
    return buf;
  }

  bool parseValue(std::string* out) {
    const char quote = peek();
    if (quote != '"' && quote != '\'') return error("attribute value must be quoted");
    advance();
    out->clear();
    while (!atEnd() && peek() != quote) {
      if (peek() == '<') return error("'<' inside an attribute value");
      if (peek() == '&') {
        static constexpr std::pair<std::string_view, char> kEntities[] = {
            {"&quot;", '"'}, {"&apos;", '\''}, {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}};
        bool known = false;
        for (const auto& [name, c] : kEntities)
          if (startsWith(name)) {
            out->push_back(c);
            advance(name.size());
            known = true;
            break;
          }
        if (!known)
          return error("unknown entity in an attribute value (only &quot; &apos; &amp; &lt; &gt;)");
        continue;
      }
      out->push_back(peek());
      advance();
      if (out->size() > kXmlMaxToken) return error("attribute value too long");
    }
    if (atEnd()) return error("attribute value never closed");
    advance();  // the closing quote
    return true;
  }

  bool parseElement(XmlNode* node, int depth) {
    if (depth > kXmlMaxDepth)
      return error("elements nested deeper than " + std::to_string(kXmlMaxDepth));
    if (++nodes_ > kXmlMaxNodes)
      return error("more than " + std::to_string(kXmlMaxNodes) + " elements");
    if (peek() != '<') return error(std::string("expected '<', found '") + printable(peek()) + "'");
    node->line = line_;
    advance();
    if (!parseName(&node->name, "an element name")) return false;
    for (;;) {
      const bool spaced = isSpace(peek());
      skipSpace();
      if (atEnd()) return error("<" + node->name + "> never closed (end of file inside the tag)");
      if (peek() == '/') {
        advance();
        if (peek() != '>') return error("expected '>' after '/' in <" + node->name + ">");
        advance();
        return true;  // <x .../>
      }
      if (peek() == '>') {
        advance();
        break;
      }
      if (!spaced) return error("expected a space before the attribute in <" + node->name + ">");
      std::string key, value;
      if (!parseName(&key, "an attribute name")) return false;
      skipSpace();
      if (peek() != '=') return error("expected '=' after attribute " + key);
      advance();
      skipSpace();
      if (!parseValue(&value)) return false;
      if (node->attr(key))
        return error("attribute " + key + " given twice in <" + node->name + ">");
      node->attrs.emplace_back(std::move(key), std::move(value));
    }
    // Children until the matching close tag.
    for (;;) {
      skipMisc();
      if (!ok_) return false;
      if (atEnd())
        return error("<" + node->name + "> (line " + std::to_string(node->line) + ") never closed");
      if (startsWith("</")) {
        advance(2);
        std::string closing;
        if (!parseName(&closing, "an element name")) return false;
        skipSpace();
        if (peek() != '>') return error("expected '>' to end </" + closing + ">");
        advance();
        if (closing != node->name)
          return error("</" + closing + "> closes <" + node->name + "> (line " +
                       std::to_string(node->line) + ")");
        return true;
      }
      if (peek() != '<')
        return error("text inside <" + node->name + "> (only elements are allowed)");
      node->subs.emplace_back();
      if (!parseElement(&node->subs.back(), depth + 1)) return false;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t nodes_ = 0;
  bool ok_ = true;
  std::string message_;
};

std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    switch (c) {
      case '"':
        out += "&quot;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

void writeNode(const XmlNode& node, int indent, std::string* out) {
  out->append(static_cast<size_t>(indent), ' ');
  *out += "<" + node.name;
  for (const auto& [k, v] : node.attrs) *out += " " + k + "=\"" + escape(v) + "\"";
  if (node.subs.empty()) {
    *out += "/>\n";
    return;
  }
  *out += ">\n";
  for (const XmlNode& s : node.subs) writeNode(s, indent + 2, out);
  out->append(static_cast<size_t>(indent), ' ');
  *out += "</" + node.name + ">\n";
}

}  // namespace

bool parseXml(std::string_view text, XmlNode* root, std::string* error) {
  *root = XmlNode{};
  Reader reader(text);
  if (reader.parseDocument(root)) return true;
  *error = reader.message();
  return false;
}

std::string writeXml(const XmlNode& root) {
  std::string out;
  writeNode(root, 0, &out);
  return out;
}

ncclResult_t readXmlFile(const std::string& path, const char* what, XmlNode* root) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return fail(ncclInvalidArgument, "topology", "%s=%s: cannot open the file (%s)", what,
                path.c_str(), std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string error;
  if (!parseXml(ss.str(), root, &error))
    return fail(ncclInvalidArgument, "topology", "%s=%s: not a topology file: %s", what,
                path.c_str(), error.c_str());
  return ncclSuccess;
}

ncclResult_t writeXmlFile(const std::string& path, const char* what, const XmlNode& root) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << writeXml(root);
  if (!out)
    return fail(ncclSystemError, "topology", "%s=%s: cannot write the file (%s)", what,
                path.c_str(), std::strerror(errno));
  return ncclSuccess;
}

}  // namespace ringcc
