// The virtual core's DMA queues: one large copy is cut into slices that move
// concurrently, the way a NeuronCore spreads a transfer over its DMA rings.
#pragma once

#include <cstddef>

namespace openneuron::runtime {

// memmove(dst, src, bytes). Copies of a few MiB or more whose ranges do not
// overlap are split over helper threads plus the calling thread; smaller or
// overlapping ones, or one arriving while another copy holds the helpers,
// run on the calling thread alone.
void dma_copy(void* dst, const void* src, size_t bytes);

}  // namespace openneuron::runtime
