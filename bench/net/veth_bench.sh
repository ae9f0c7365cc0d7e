#!/usr/bin/env bash
# Measures all-reduce across a veth pair between two network namespaces (2 ranks, one per
# namespace; root needed), against the same pair's raw UCX bandwidth (ucx_perftest, tag_bw
# over tcp: one way, and both ways at once as the all-reduce uses it) and against OpenMPI's tcp
# all-reduce. Prints four tables; docs/benchmarks.md keeps the numbers. Usage: bench/net/veth_bench.sh [build-dir]   (needs ucx-utils, openmpi-bin)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
A=rccbench$$a B=rccbench$$b
cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$A"
ip netns add "$B"
ip -n "$A" link add rcc0 type veth peer name rcc0 netns "$B"  # same name in both
ip -n "$A" addr add 10.98.0.1/24 dev rcc0
ip -n "$B" addr add 10.98.0.2/24 dev rcc0
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set rcc0 up
ip -n "$B" link set rcc0 up
# UCX takes only running interfaces: wait for the carrier on both ends.
for i in $(seq 50); do
  ip -n "$A" link show rcc0 | grep -q LOWER_UP && ip -n "$B" link show rcc0 | grep -q LOWER_UP && break
  sleep 0.1
done

# mpirun runs in A; it starts rank 1's daemon "on host 10.98.0.2" through an rsh agent that
# runs it in B, so the daemons (and MPI's tcp btl) talk over the veth pair only. A wrapper
# gives each rank its interface and host id.
agent=$(mktemp) wrap=$(mktemp)
cat > "$agent" <<AGENT
#!/usr/bin/env bash
shift  # the host name: always B here
exec ip netns exec $B sh -c "\$*"
AGENT
cat > "$wrap" <<'WRAP'
#!/usr/bin/env bash
r=${OMPI_COMM_WORLD_RANK:-0}
exec env UCX_NET_DEVICES=rcc0 UCX_TLS=tcp NCCL_HOSTID=host$r NCCL_SOCKET_IFNAME=rcc "$@"
WRAP
chmod +x "$agent" "$wrap"
MPIRUN=(ip netns exec "$A" mpirun --allow-run-as-root -np 2 --host 10.98.0.1,10.98.0.2
        --mca plm_rsh_agent "$agent" --mca pml ob1 --mca btl self,tcp
        --mca btl_tcp_if_include rcc0 --mca oob_tcp_if_include rcc0)
SIZES=(${VETH_BENCH_SIZES:--b 64K -e 64M -f 4 -n 20 -w 5})
# Extra variables for the ranks (names, space separated; exported to both namespaces).
for v in ${VETH_BENCH_EXPORT:-}; do MPIRUN+=(-x "$v"); done

if [ -z "${VETH_BENCH_SKIP_PERFTEST:-}" ]; then
echo "## ucx_perftest tag_bw over tcp, B -> A"
ip netns exec "$A" env UCX_NET_DEVICES=rcc0 UCX_TLS=tcp ucx_perftest -t tag_bw -s 16777216 -n 40 \
  > /tmp/ucx_perftest_server.$$ 2>&1 &
sleep 1
ip netns exec "$B" env UCX_NET_DEVICES=rcc0 UCX_TLS=tcp ucx_perftest 10.98.0.1 -t tag_bw \
  -s 16777216 -n 40 | tail -3
wait || true
# A 2-rank all-reduce sends both ways at once, and on this CPU-bound path (the kernel's tcp
# stack on the same cores) each direction then gets far less than a one-way stream: the
# like-for-like ceiling is two streams at once, one each way. 150 x 16 MiB keeps both running
# for seconds, so they overlap all but their first and last milliseconds.
echo "## ucx_perftest tag_bw over tcp, both ways at once (A -> B and B -> A)"
for ns in "$A" "$B"; do
  port=$([ "$ns" = "$A" ] && echo 13401 || echo 13402)
  ip netns exec "$ns" env UCX_NET_DEVICES=rcc0 UCX_TLS=tcp ucx_perftest -t tag_bw -s 16777216 \
    -n 150 -p "$port" > /dev/null 2>&1 &
done
sleep 1
ip netns exec "$B" env UCX_NET_DEVICES=rcc0 UCX_TLS=tcp ucx_perftest 10.98.0.1 -t tag_bw \
  -s 16777216 -n 150 -p 13401 2>&1 | tail -1 | sed 's/^/B -> A /' &
ip netns exec "$A" env UCX_NET_DEVICES=rcc0 UCX_TLS=tcp ucx_perftest 10.98.0.2 -t tag_bw \
  -s 16777216 -n 150 -p 13402 2>&1 | tail -1 | sed 's/^/A -> B /' &
wait || true
fi

echo "## ringcc all_reduce_perf (float sum), 2 ranks across the veth pair (UCX)"
"${MPIRUN[@]}" "$wrap" "$BUILD/bench/all_reduce_perf" "${SIZES[@]}" | grep -E "^ +[0-9]|#  *size"

[ -n "${VETH_BENCH_SKIP_MPI:-}" ] && exit 0
echo "## OpenMPI MPI_Allreduce (ob1, btl tcp) across the same pair"
"${MPIRUN[@]}" "$wrap" "$BUILD/bench/mpi/mpi_allreduce_bench" "${SIZES[@]}" |
  grep -E "^ +[0-9]|#  *size"
rm -f "$wrap" "$agent"
