"""Every collective of the neuron backend, in every dtype c10d defines it for, against a
reference each rank computes on the CPU from all ranks' inputs (each rank can rebuild any
rank's input from its seed), and against Gloo on the same data where Gloo supports it.

Usage (under torchrun): collectives.py [--init backend|device_id]
"""

import argparse
import datetime
import functools
import operator

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fcol

from common import finish, RANK, WORLD_SIZE, assert_close, device, say

INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
FLOATS = [torch.float32, torch.bfloat16, torch.float16]
COMPLEX = [torch.complex64]  # SUM and AVG, as c10d defines them for complex
SIZES = [1, 7, 1000, 70_001]  # 70_001 float32 spans several rounds of a 64 KiB chunk
# Beyond 64 KiB in every dtype: all_reduce works in place on the peers' memory.
LARGE = 40_000


def data(rank, n, dtype, salt=0):
    """Rank `rank`'s input: small values, so integer products stay in range."""
    g = torch.Generator().manual_seed(1000 * rank + 17 * n + salt)
    if dtype == torch.bool:
        return torch.rand(n, generator=g) > 0.5
    if dtype.is_complex:
        return torch.complex(torch.rand(n, generator=g) * 4 - 2, torch.rand(n, generator=g) * 4 - 2)
    if dtype.is_floating_point:
        return (torch.rand(n, generator=g) * 4 - 2).to(dtype)
    lo = 0 if dtype == torch.uint8 else -3
    return torch.randint(lo, 4, (n,), generator=g).to(dtype)


def reference_reduce(inputs, op, dtype):
    """The CPU's answer, accumulated in float32 for the half types and rounded once."""
    acc = [x.float() if dtype in (torch.float16, torch.bfloat16) else x for x in inputs]
    if op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
        out = functools.reduce(operator.add, acc) if dtype != torch.bool else \
            functools.reduce(torch.logical_or, acc)
    elif op == dist.ReduceOp.PRODUCT:
        out = functools.reduce(operator.mul, acc) if dtype != torch.bool else \
            functools.reduce(torch.logical_and, acc)
    elif op == dist.ReduceOp.MIN:
        out = functools.reduce(torch.minimum, acc)
    elif op == dist.ReduceOp.MAX:
        out = functools.reduce(torch.maximum, acc)
    elif op == dist.ReduceOp.BAND:
        out = functools.reduce(operator.and_, acc)
    elif op == dist.ReduceOp.BOR:
        out = functools.reduce(operator.or_, acc)
    elif op == dist.ReduceOp.BXOR:
        out = functools.reduce(operator.xor, acc)
    out = out.to(dtype)
    if op == dist.ReduceOp.AVG and dtype.is_complex:  # each part divided, as c10d views complex as real
        out = torch.view_as_complex(torch.view_as_real(out) / WORLD_SIZE)
    elif op == dist.ReduceOp.AVG:
        out = out / WORLD_SIZE if dtype.is_floating_point else torch.div(out, WORLD_SIZE, rounding_mode="trunc")
    return out


def ops_for(dtype):
    if dtype.is_complex:
        return [dist.ReduceOp.SUM, dist.ReduceOp.AVG]
    if dtype == torch.bool:
        return [dist.ReduceOp.SUM, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
    if dtype.is_floating_point:
        return ops + [dist.ReduceOp.AVG]
    return ops + [dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR]


def tol(dtype):
    # AVG divides the rounded sum: one more rounding of the half types.
    return {"rtol": 1e-2, "atol": 1e-2} if dtype in (torch.float16, torch.bfloat16) else {}


def check_reductions(dtype, n):
    dev = device()
    inputs = [data(r, n, dtype) for r in range(WORLD_SIZE)]
    for op in ops_for(dtype):
        ref = reference_reduce(inputs, op, dtype)
        t = inputs[RANK].to(dev)
        dist.all_reduce(t, op=op)
        assert_close(t, ref, f"all_reduce {op} {dtype} n={n}", **tol(dtype))

        root = WORLD_SIZE - 1
        t = inputs[RANK].to(dev)
        dist.reduce(t, dst=root, op=op)
        assert_close(t, ref if RANK == root else inputs[RANK], f"reduce {op} {dtype} n={n}",
                     **tol(dtype))

        # reduce_scatter: block r of every rank's input reduces into rank r's output.
        blocks = [torch.cat([data(r, n, dtype, salt=b) for b in range(WORLD_SIZE)])
                  for r in range(WORLD_SIZE)]
        ref_rs = reference_reduce([blk[RANK * n:(RANK + 1) * n] for blk in blocks], op, dtype)
        out = torch.empty(n, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(out, blocks[RANK].to(dev), op=op)
        assert_close(out, ref_rs, f"reduce_scatter_tensor {op} {dtype} n={n}", **tol(dtype))
        out = torch.empty(n, dtype=dtype, device=dev)
        dist.reduce_scatter(out, list(blocks[RANK].to(dev).chunk(WORLD_SIZE)), op=op)
        assert_close(out, ref_rs, f"reduce_scatter {op} {dtype} n={n}", **tol(dtype))


def check_data_movement(dtype, n):
    dev = device()
    inputs = [data(r, n, dtype) for r in range(WORLD_SIZE)]
    mine = inputs[RANK].to(dev)

    root = WORLD_SIZE - 1
    t = mine.clone()
    dist.broadcast(t, src=root)
    assert_close(t, inputs[root], f"broadcast {dtype} n={n}")

    outs = [torch.empty(n, dtype=dtype, device=dev) for _ in range(WORLD_SIZE)]
    dist.all_gather(outs, mine)
    for r in range(WORLD_SIZE):
        assert_close(outs[r], inputs[r], f"all_gather[{r}] {dtype} n={n}")
    out = torch.empty(WORLD_SIZE * n, dtype=dtype, device=dev)
    dist.all_gather_into_tensor(out, mine)
    assert_close(out, torch.cat(inputs), f"all_gather_into_tensor {dtype} n={n}")

    gathered = [torch.empty(n, dtype=dtype, device=dev) for _ in range(WORLD_SIZE)] if RANK == 0 else None
    dist.gather(mine, gathered, dst=0)
    if RANK == 0:
        for r in range(WORLD_SIZE):
            assert_close(gathered[r], inputs[r], f"gather[{r}] {dtype} n={n}")

    pieces = [data(root, n, dtype, salt=r + 1) for r in range(WORLD_SIZE)]
    out = torch.empty(n, dtype=dtype, device=dev)
    dist.scatter(out, [p.to(dev) for p in pieces] if RANK == root else None, src=root)
    assert_close(out, pieces[RANK], f"scatter {dtype} n={n}")


def check_all_to_all(dtype):
    """Uneven splits: rank s sends (s + d + 1) * 3 rows of 2 elements to rank d (and 0
    rows from rank 0 to itself, a zero-sized block)."""
    dev = device()

    def rows(s, d):
        return 0 if s == d == 0 else (s + d + 1) * 3

    def block(s, d):
        return data(s, rows(s, d) * 2, dtype, salt=100 + d).view(-1, 2)

    send = torch.cat([block(RANK, d) for d in range(WORLD_SIZE)]).to(dev)
    out = torch.empty(sum(rows(s, RANK) for s in range(WORLD_SIZE)), 2, dtype=dtype, device=dev)
    dist.all_to_all_single(out, send, output_split_sizes=[rows(s, RANK) for s in range(WORLD_SIZE)],
                           input_split_sizes=[rows(RANK, d) for d in range(WORLD_SIZE)])
    assert_close(out, torch.cat([block(s, RANK) for s in range(WORLD_SIZE)]), f"all_to_all_single {dtype}")

    even_in = data(RANK, 6 * WORLD_SIZE, dtype, salt=7).to(dev)
    even_out = torch.empty_like(even_in)
    dist.all_to_all_single(even_out, even_in)
    ref = torch.cat([data(s, 6 * WORLD_SIZE, dtype, salt=7)[RANK * 6:(RANK + 1) * 6] for s in range(WORLD_SIZE)])
    assert_close(even_out, ref, f"all_to_all_single even {dtype}")

    outs = [torch.empty(rows(s, RANK), 2, dtype=dtype, device=dev) for s in range(WORLD_SIZE)]
    dist.all_to_all(outs, [block(RANK, d).to(dev) for d in range(WORLD_SIZE)])
    for s in range(WORLD_SIZE):
        assert_close(outs[s], block(s, RANK), f"all_to_all[{s}] {dtype}")


def check_point_to_point():
    dev = device()
    nxt, prv = (RANK + 1) % WORLD_SIZE, (RANK - 1) % WORLD_SIZE
    big = data(RANK, 3_000_001, torch.float32).to(dev)  # larger than one ring
    got = torch.empty_like(big)
    # Blocking calls: a send completes once the peer took the data (as with NCCL), so
    # odd ranks receive first.
    if RANK % 2 == 0:
        dist.send(big, nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(big, nxt)
    assert_close(got, data(prv, 3_000_001, torch.float32), "send/recv ring")
    # Asynchronous calls: every rank sends first; sends and receives run on streams of
    # their own, so neither waits for the other.
    got = torch.empty_like(big)
    works = [dist.isend(big * 2, nxt), dist.irecv(got, prv)]
    for w in works:
        w.wait()
    assert_close(got, data(prv, 3_000_001, torch.float32) * 2, "isend/irecv ring")

    ops = [dist.P2POp(dist.isend, data(RANK, 10, torch.int64).to(dev), nxt),
           dist.P2POp(dist.irecv, torch.empty(10, dtype=torch.int64, device=dev), prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert_close(ops[1].tensor, data(prv, 10, torch.int64), "batch_isend_irecv")


def check_coalesced_and_premul():
    dev = device()
    group = dist.group.WORLD
    ins = [data(RANK, n, torch.float32).to(dev) for n in (5, 300)]
    outs = fcol.all_gather_into_tensor_coalesced(ins, group=group)
    for o, n in zip(outs, (5, 300)):
        assert_close(o, torch.cat([data(r, n, torch.float32) for r in range(WORLD_SIZE)]),
                     "all_gather_into_tensor_coalesced")
    big = [torch.cat([data(r * 10 + b, n, torch.float32) for b in range(WORLD_SIZE)]) for r in range(WORLD_SIZE)
           for n in (4,)]
    rs = fcol.reduce_scatter_tensor_coalesced([big[RANK].to(dev)], "sum", [0], group=group)
    ref = functools.reduce(operator.add, [b[RANK * 4:(RANK + 1) * 4] for b in big])
    assert_close(rs[0], ref, "reduce_scatter_tensor_coalesced", rtol=1e-6, atol=1e-6)
    ars = fcol.all_reduce_coalesced(ins, "sum", group=group)
    for a, n in zip(ars, (5, 300)):
        assert_close(a, sum(data(r, n, torch.float32) for r in range(WORLD_SIZE)), "all_reduce_coalesced",
                     rtol=1e-6, atol=1e-6)

    # PREMUL_SUM, as FSDP2 reduces gradients with a divide factor.
    factor = 0.25
    op = dist._make_nccl_premul_sum(factor)
    t = data(RANK, 100, torch.float32).to(dev)
    dist.all_reduce(t, op=op)
    assert_close(t, sum(data(r, 100, torch.float32) for r in range(WORLD_SIZE)) * factor, "premul_sum",
                 rtol=1e-6, atol=1e-6)
    out = torch.empty(10, device=dev)
    inp = torch.cat([data(RANK, 10, torch.float32, salt=b) for b in range(WORLD_SIZE)]).to(dev)
    dist.reduce_scatter_tensor(out, inp, op=op)
    ref = sum(data(r, 10, torch.float32, salt=RANK) for r in range(WORLD_SIZE)) * factor
    assert_close(out, ref, "reduce_scatter_tensor premul_sum", rtol=1e-6, atol=1e-6)


def check_work_and_streams():
    dev = device()
    # The input is produced by queued device work; the collective waits for it, and
    # the next op on the stream waits for the collective, without the host blocking.
    a = torch.full((256, 256), 1.0 / 256, device=dev)
    x = a @ a @ a  # every element 1/256
    work = dist.all_reduce(x, async_op=True)
    fut = work.get_future()
    assert work.wait() is True
    y = x * 2
    assert_close(y, torch.full((256, 256), 2.0 * WORLD_SIZE / 256), "stream-ordered all_reduce",
                 rtol=1e-6, atol=1e-7)
    assert work.is_completed() and work.is_success()
    assert_close(fut.wait()[0], x.cpu(), "future value")
    w2 = dist.all_reduce(torch.ones(3, device=dev), async_op=True)
    assert w2.wait(timeout=datetime.timedelta(seconds=60)) is True
    dist.barrier()
    # The Gloo side of a mixed backend sees the same values.
    cpu = data(RANK, 50, torch.float32)
    dist.all_reduce(cpu)
    assert_close(cpu, sum(data(r, 50, torch.float32) for r in range(WORLD_SIZE)), "gloo all_reduce",
                 rtol=1e-6, atol=1e-6)


def check_subgroups():
    """new_group and a DeviceMesh dimension run their own collectives."""
    dev = device()
    ranks = list(range(WORLD_SIZE - 1, -1, -1))[:2]  # the last two ranks, reversed
    g = dist.new_group(ranks)
    if RANK in ranks:
        t = torch.full((4,), float(RANK), device=dev)
        dist.all_reduce(t, group=g)
        assert_close(t, torch.full((4,), float(sum(ranks))), "new_group all_reduce")
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("neuron", (WORLD_SIZE,), mesh_dim_names=("dp",))
    t = torch.full((2,), float(RANK + 1), device=dev)
    dist.all_reduce(t, group=mesh.get_group("dp"))
    assert_close(t, torch.full((2,), float(sum(range(1, WORLD_SIZE + 1)))), "mesh all_reduce")


def check_peer_memory():
    """Under torchrun every rank's device memory is shareable: a large all_reduce runs in
    place on the peers' tensors (the staged fallback, for memory that is not, is covered
    by the transport's C++ tests)."""
    backend = dist.distributed_c10d._get_default_group()._get_backend(device())
    assert backend.uses_peer_memory, f"rank {RANK}: the ranks did not map each other's memory"
    inputs = [data(r, LARGE, torch.float32, salt=7) for r in range(WORLD_SIZE)]
    before = backend.in_place_collectives
    t = inputs[RANK].to(device())
    dist.all_reduce(t)
    torch.neuron.synchronize()
    assert_close(t, reference_reduce(inputs, dist.ReduceOp.SUM, torch.float32),
                 "all_reduce in the peers' memory")
    assert backend.in_place_collectives == before + 1, (backend.in_place_collectives, before)


def check_bad_calls():
    try:
        dist.all_reduce(torch.ones(3, 2, device=device())[:, 0])
    except Exception as e:  # noqa: BLE001
        assert "contiguous" in str(e), e
    else:
        raise AssertionError(f"rank {RANK}: a non-contiguous tensor was accepted")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--init", choices=["backend", "device_id"], default="backend")
    args = parser.parse_args()
    if args.init == "backend":
        dist.init_process_group("cpu:gloo,neuron:neuron")
    else:
        # No backend named: the default for device type neuron, bound to this core.
        dist.init_process_group(device_id=device())
    assert torch.neuron.current_device() == device().index
    for dtype in FLOATS + COMPLEX + INTS + [torch.bool]:
        for n in (SIZES if dtype == torch.float32 else SIZES[:3] + [LARGE]):
            check_reductions(dtype, n)
            check_data_movement(dtype, n)
        check_all_to_all(dtype)
    check_point_to_point()
    check_coalesced_and_premul()
    if args.init == "backend":
        check_work_and_streams()
        check_peer_memory()
    check_subgroups()
    check_bad_calls()
    finish()
    say(f"rank {RANK}: all collectives match")


if __name__ == "__main__":
    main()
