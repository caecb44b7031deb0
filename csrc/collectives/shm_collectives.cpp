// The collective algorithms. Each is a sequence of rounds: a rank writes its
// part of the round into its staging buffer (round_ % 2), every rank passes a
// barrier, then reads what it needs from the peers' buffers. Writing buffer b
// in round k happens after the barrier of round k - 1, which every peer passed
// only after reading round k - 2 from it, so two buffers suffice. Every
// collective has at least one round: its first barrier compares the headers.
#include <algorithm>
#include <cstring>

#include "openneuron/kernels/kernels.h"
#include "shm_impl.h"

namespace openneuron::collectives::detail {
namespace {

// Below this one round has every rank reduce the whole message itself (one
// barrier); above, each reduces a slice and gathers the others' (two barriers,
// 1/size of the reduction work each). Measured on 2 ranks, see the bench test.
constexpr size_t kSmallAllReduce = size_t{64} << 10;

void copy(void* dst, const void* src, size_t n) {
  if (n == 0 || dst == src) return;
  kernels::copy_buffer(dst, src, n);
}

bool reducible(DType d, ReduceOp op) {
  const bool bit = op == ReduceOp::BitAnd || op == ReduceOp::BitOr || op == ReduceOp::BitXor;
  switch (d) {
    case DType::Bool: return op != ReduceOp::BitXor;
    case DType::UInt8: case DType::Int8: case DType::Int16: case DType::Int32: case DType::Int64:
      return true;
    case DType::Float16: case DType::BFloat16: case DType::Float32: case DType::Float64: return !bit;
    default: return false;
  }
}

// A complex sum is the sum of the real and imaginary parts: the same reduction
// over twice as many floats (c10d views complex tensors as real for SUM too).
void sum_complex_as_real(DType* dtype, size_t* count, ReduceOp op) {
  if (*dtype == DType::Complex64 && op == ReduceOp::Sum) {
    *dtype = DType::Float32;
    *count *= 2;
  }
}

kernels::BufferReduce buffer_op(ReduceOp op) { return static_cast<kernels::BufferReduce>(op); }

// Elements of one rank's slice per round: a multiple of 16 (64-byte aligned
// slices for 4-byte types) that fits size slices in a staging buffer.
size_t slice_capacity(size_t chunk, size_t es, int size) {
  const size_t s = chunk / es / static_cast<size_t>(size);
  return s >= 16 ? s / 16 * 16 : std::max<size_t>(s, 1);
}

}  // namespace

void ShmCommunicatorImpl::reduce_impl(char* data, size_t count, DType dtype, ReduceOp op, int root) {
  sum_complex_as_real(&dtype, &count, op);
  const bool all = root < 0;
  const size_t es = dtype_size(dtype);
  const size_t bytes = count * es;
  const bool small = bytes <= kSmallAllReduce && bytes <= opt_.chunk_bytes;
  // In place on the peers' buffers when all are in shareable memory: decided
  // after the first barrier, from every rank's header, so alike on all ranks.
  const bool try_in_place = all && !small && peer_memory_;
  const uint64_t offset = try_in_place ? shared_offset_of(data) : CallHeader::kNotShared;
  in_place_window_ = false;
  begin(all ? CollectiveKind::AllReduce : CollectiveKind::Reduce, static_cast<uint8_t>(dtype),
        static_cast<uint8_t>(op), root, bytes, nullptr, nullptr, offset);
  if (!reducible(dtype, op)) {
    fail(what_ + ": " + reduce_op_name(op) + " is not supported for " + dtype_name(dtype));
  }
  const int n = size_, r = rank_;
  std::vector<const void*> srcs(n);
  if (try_in_place) {
    // Peers write into this rank's buffer only if it is shared.
    in_place_window_ = offset != CallHeader::kNotShared;
    sync();
    std::vector<char*> buffers;
    if (peer_buffers(data, &buffers)) {
      all_reduce_in_place(buffers, count, dtype, op);
      in_place_window_ = false;
      return;
    }
    in_place_window_ = false;
  }
  if (small) {
    copy(stage(r), data, bytes);
    sync();
    // Every rank sums in rank order: bitwise identical results everywhere.
    for (int j = 0; j < n; ++j) srcs[j] = j == r ? data : stage(j);
    if (all || r == root) kernels::reduce_buffers(dtype, buffer_op(op), data, srcs.data(), n, count);
    next_round();
    return;
  }
  // Reduce-scatter then all-gather inside each round: rank r reduces slice r.
  const size_t cap = slice_capacity(opt_.chunk_bytes, es, n);
  size_t off = 0;
  do {
    const size_t m = std::min(count - off, cap * n);
    const size_t slice = std::min(cap, ((m + n - 1) / n + 15) / 16 * 16);
    auto lo = [&](int j) { return std::min(m, static_cast<size_t>(j) * slice) * es; };
    auto hi = [&](int j) { return std::min(m, static_cast<size_t>(j + 1) * slice) * es; };
    char* chunk = data + off * es;
    char* mine = stage(r);
    copy(mine, chunk, lo(r));                               // slices before r
    copy(mine + hi(r), chunk + hi(r), m * es - hi(r));      // slices after r
    sync();
    for (int j = 0; j < n; ++j) srcs[j] = j == r ? chunk + lo(r) : stage(j) + lo(r);
    const size_t len = (hi(r) - lo(r)) / es;
    if (all) {
      kernels::reduce_buffers(dtype, buffer_op(op), chunk + lo(r), srcs.data(), n, len, mine + lo(r));
    } else {
      // reduce leaves non-root data untouched: the slice is reduced into staging.
      kernels::reduce_buffers(dtype, buffer_op(op), mine + lo(r), srcs.data(), n, len);
    }
    sync();
    if (all || r == root) {
      for (int j = 0; j < n; ++j) {
        if (j == r && all) continue;
        copy(chunk + lo(j), stage(j) + lo(j), hi(j) - lo(j));
      }
    }
    next_round();
    off += m;
  } while (off < count);
}

// Rank r reduces slice r of every rank's buffer and writes the result into
// slice r of all of them: each rank reads and writes the message once, and
// nothing is staged. The second barrier keeps every buffer in use until all
// slices are written.
void ShmCommunicatorImpl::all_reduce_in_place(const std::vector<char*>& buffers, size_t count,
                                              DType dtype, ReduceOp op) {
  const int n = size_, r = rank_;
  const size_t es = dtype_size(dtype);
  const size_t slice = ((count + n - 1) / n + 15) / 16 * 16;
  const size_t lo = std::min(count, static_cast<size_t>(r) * slice);
  const size_t len = std::min(count, lo + slice) - lo;
  std::vector<const void*> srcs(n);
  for (int j = 0; j < n; ++j) srcs[j] = buffers[j] + lo * es;
  char* mine = buffers[r] + lo * es;
  // The kernel writes a second output as it goes; the other peers get a copy.
  char* next = buffers[(r + 1) % n] + lo * es;
  kernels::reduce_buffers(dtype, buffer_op(op), mine, srcs.data(), n, len, next);
  for (int j = 0; j < n; ++j) {
    if (j != r && j != (r + 1) % n) copy(buffers[j] + lo * es, mine, len * es);
  }
  sync();
  in_place_calls_.fetch_add(1, std::memory_order_relaxed);
}

void ShmCommunicatorImpl::all_reduce(void* data, size_t count, DType dtype, ReduceOp op) {
  guarded([&] { reduce_impl(static_cast<char*>(data), count, dtype, op, -1); });
}

void ShmCommunicatorImpl::reduce(void* data, size_t count, DType dtype, ReduceOp op, int root) {
  guarded([&] {
    if (root < 0) {
      begin(CollectiveKind::Reduce, static_cast<uint8_t>(dtype), static_cast<uint8_t>(op), root, count);
      fail(what_ + ": root " + std::to_string(root) + " out of range");
    }
    reduce_impl(static_cast<char*>(data), count, dtype, op, root);
  });
}

void ShmCommunicatorImpl::broadcast(void* data_v, size_t bytes, int root) {
  guarded([&] {
    begin(CollectiveKind::Broadcast, 0xff, 0, root, bytes);
    char* data = static_cast<char*>(data_v);
    size_t off = 0;
    do {
      const size_t m = std::min(bytes - off, opt_.chunk_bytes);
      if (rank_ == root) copy(stage(rank_), data + off, m);
      sync();
      if (rank_ != root) copy(data + off, stage(root), m);
      next_round();
      off += m;
    } while (off < bytes);
  });
}

void ShmCommunicatorImpl::all_gather(const void* input_v, size_t bytes, void* const* outputs) {
  guarded([&] {
    begin(CollectiveKind::AllGather, 0xff, 0, -1, bytes);
    const char* input = static_cast<const char*>(input_v);
    size_t off = 0;
    do {
      const size_t m = std::min(bytes - off, opt_.chunk_bytes);
      copy(stage(rank_), input + off, m);
      sync();
      for (int j : others_) copy(static_cast<char*>(outputs[j]) + off, stage(j), m);
      next_round();
      off += m;
    } while (off < bytes);
    copy(outputs[rank_], input, bytes);
  });
}

void ShmCommunicatorImpl::reduce_scatter(const void* const* inputs, void* output_v, size_t count,
                                         DType dtype, ReduceOp op) {
  guarded([&] {
    sum_complex_as_real(&dtype, &count, op);
    const size_t es = dtype_size(dtype);
    begin(CollectiveKind::ReduceScatter, static_cast<uint8_t>(dtype), static_cast<uint8_t>(op), -1,
          count * es);
    if (!reducible(dtype, op)) {
      fail(what_ + ": " + reduce_op_name(op) + " is not supported for " + dtype_name(dtype));
    }
    const int n = size_, r = rank_;
    char* output = static_cast<char*>(output_v);
    const size_t cap = slice_capacity(opt_.chunk_bytes, es, n);
    std::vector<const void*> srcs(n);
    size_t off = 0;
    do {
      const size_t m = std::min(count - off, cap);
      for (int j : others_)
        copy(stage(r) + j * cap * es, static_cast<const char*>(inputs[j]) + off * es, m * es);
      sync();
      for (int j = 0; j < n; ++j) {
        srcs[j] = j == r ? static_cast<const char*>(inputs[r]) + off * es : stage(j) + r * cap * es;
      }
      kernels::reduce_buffers(dtype, buffer_op(op), output + off * es, srcs.data(), n, m);
      next_round();
      off += m;
    } while (off < count);
  });
}

void ShmCommunicatorImpl::gather(const void* input_v, size_t bytes, void* const* outputs, int root) {
  guarded([&] {
    begin(CollectiveKind::Gather, 0xff, 0, root, bytes);
    if (root < 0) fail(what_ + ": root " + std::to_string(root) + " out of range");
    const char* input = static_cast<const char*>(input_v);
    size_t off = 0;
    do {
      const size_t m = std::min(bytes - off, opt_.chunk_bytes);
      if (rank_ != root) copy(stage(rank_), input + off, m);
      sync();
      if (rank_ == root) {
        for (int j : others_) copy(static_cast<char*>(outputs[j]) + off, stage(j), m);
      }
      next_round();
      off += m;
    } while (off < bytes);
    if (rank_ == root) copy(outputs[root], input, bytes);
  });
}

void ShmCommunicatorImpl::scatter(const void* const* inputs, void* output_v, size_t bytes, int root) {
  guarded([&] {
    begin(CollectiveKind::Scatter, 0xff, 0, root, bytes);
    if (root < 0) fail(what_ + ": root " + std::to_string(root) + " out of range");
    char* output = static_cast<char*>(output_v);
    const size_t cap = slice_capacity(opt_.chunk_bytes, 1, size_);
    size_t off = 0;
    do {
      const size_t m = std::min(bytes - off, cap);
      if (rank_ == root) {
        for (int j : others_) copy(stage(root) + j * cap, static_cast<const char*>(inputs[j]) + off, m);
      }
      sync();
      if (rank_ != root) copy(output + off, stage(root) + rank_ * cap, m);
      next_round();
      off += m;
    } while (off < bytes);
    if (rank_ == root) copy(output, inputs[root], bytes);
  });
}

void ShmCommunicatorImpl::all_to_all(const void* const* inputs, const size_t* input_bytes,
                                     void* const* outputs, const size_t* output_bytes) {
  guarded([&] {
    uint64_t total = 0;
    for (int j = 0; j < size_; ++j) total += input_bytes[j];
    begin(CollectiveKind::AllToAll, 0xff, 0, -1, total, input_bytes, output_bytes);
    const size_t cap = slice_capacity(opt_.chunk_bytes, 1, size_);
    // Rounds: enough for the longest stream between any two ranks (known
    // after the first barrier, which exchanges the size vectors).
    uint64_t rounds = 1;
    for (uint64_t k = 0; k < rounds; ++k) {
      const size_t lo = k * cap;
      for (int j : others_) {
        if (lo < input_bytes[j]) {
          copy(stage(rank_) + j * cap, static_cast<const char*>(inputs[j]) + lo,
               std::min(cap, input_bytes[j] - lo));
        }
      }
      sync();
      if (k == 0) {
        for (int i = 0; i < size_; ++i) {
          const uint64_t* send = a2a_sizes(i, seq_);
          for (int j = 0; j < size_; ++j)
            if (j != i) rounds = std::max<uint64_t>(rounds, (send[j] + cap - 1) / cap);
        }
      }
      for (int j : others_) {
        if (lo < output_bytes[j]) {
          copy(static_cast<char*>(outputs[j]) + lo, stage(j) + rank_ * cap,
               std::min(cap, output_bytes[j] - lo));
        }
      }
      next_round();
    }
    copy(outputs[rank_], inputs[rank_], input_bytes[rank_]);
  });
}

void ShmCommunicatorImpl::barrier() {
  guarded([&] {
    begin(CollectiveKind::Barrier, 0xff, 0, -1, 0);
    sync();
  });
}

}  // namespace openneuron::collectives::detail
