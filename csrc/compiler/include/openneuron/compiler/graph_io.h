// Graphs as bytes, for the on-disk cache of recorded programs: a byte writer, a
// bounds-checked reader, and Graph out and in. A reader never trusts its input:
// truncated or inconsistent bytes raise FormatError, never crash.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "openneuron/compiler/graph.h"

namespace openneuron::compiler {

class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ByteWriter {
 public:
  void i64(int64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void ints(const std::vector<int64_t>& v);
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  int64_t i64();
  // A value in [lo, hi]; `what` names it in the error.
  int64_t in_range(int64_t lo, int64_t hi, const char* what);
  // A count of items that take at least `min_bytes` each: no more than the bytes left
  // can hold (so a corrupt count never makes a huge allocation).
  int64_t count(size_t min_bytes, const char* what);
  // A length-prefixed list of at most `max` ints.
  std::vector<int64_t> ints(size_t max);
  bool done() const { return at_ == in_.size(); }

 private:
  std::string_view in_;
  size_t at_ = 0;
};

void write_graph(ByteWriter& w, const Graph& g);
// Throws FormatError unless the bytes are a graph write_graph wrote.
Graph read_graph(ByteReader& r);

}  // namespace openneuron::compiler
