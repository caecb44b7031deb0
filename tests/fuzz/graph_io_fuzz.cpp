// The on-disk program cache's graph format (compiler/graph_io.h), as a recording read
// back from disk goes: bytes -> read_graph -> compile. Invariants:
//  * bytes that are not a graph raise FormatError, nothing else;
//  * a graph that reads back is exactly a prefix of the input (the format has one
//    encoding per graph), and writing it and reading that again gives the same graph;
//  * with OPENNEURON_FUZZ_COMPILE (the replays in gcc builds, which link the whole
//    compiler), compiling whatever was read either raises CompileError or gives a program
//    whose instructions only name its own argument slots (the runtime launches it as is).
//    The libFuzzer build links the graph format alone (tests/fuzz/CMakeLists.txt).
// The first byte picks the compile options; the rest is the graph.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "openneuron/compiler/graph_io.h"
#if OPENNEURON_FUZZ_COMPILE
#include "openneuron/compiler/compiler.h"
#endif

namespace {

using namespace openneuron::compiler;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "graph_io_fuzz: invariant broken: %s\n", what);
  std::abort();
}

std::string bytes_of(const Graph& g) {
  ByteWriter w;
  write_graph(w, g);
  return w.take();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  Graph g;
  try {
    ByteReader r(in);
    g = read_graph(r);
  } catch (const FormatError&) {
    return 0;
  }
  const std::string bytes = bytes_of(g);
  if (in.substr(0, bytes.size()) != bytes) fail("a graph read back is not a prefix of its bytes");
  try {
    ByteReader r(bytes);
    const Graph again = read_graph(r);
    if (!r.done()) fail("written graph has trailing bytes");
    if (bytes_of(again) != bytes || again.signature() != g.signature())
      fail("write(read(write(g))) != write(g)");
  } catch (const FormatError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    fail("a written graph does not read back");
  }
#if OPENNEURON_FUZZ_COMPILE
  CompileOptions options;
  options.fuse = (data[0] & 1) != 0;
  std::shared_ptr<const Program> program;
  try {
    program = compile(g, options);
  } catch (const CompileError&) {
    return 0;
  }
  const int64_t expect = static_cast<int64_t>(g.inputs().size() + g.outputs().size()) +
                         (program->scratch_bytes > 0 ? 1 : 0);
  if (program->num_args != expect) fail("num_args is not inputs + outputs (+ scratch)");
  for (const Instruction& ins : program->instructions)
    for (int32_t slot : ins.arg_slots)
      if (slot < 0 || slot >= program->num_args) fail("an instruction names a slot out of range");
#endif
  return 0;
}
