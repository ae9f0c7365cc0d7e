/*
 * Elastic all-reduce: lose a rank, carry on, take a replacement in.
 *
 * NRANKS processes all-reduce in a loop, checking every result exactly. At iteration KILL_AT
 * the victim is SIGKILLed; the survivors' all-reduce fails (ncclRemoteError, in bounded time:
 * ringcc watches its peers), they learn from the launcher who died, ncclCommShrink it out and
 * redo the iteration on NRANKS-1 ranks. GROW_AFTER iterations later the lowest survivor (rank 0
 * of the shrunk communicator) makes a grow id (ncclCommGetUniqueId) and hands it to the
 * launcher, which starts a replacement process; the survivors and it ncclCommGrow back to
 * NRANKS ranks (the survivors keep ranks 0..NRANKS-2, the replacement is NRANKS-1), rank 0
 * broadcasts the iteration to resume at (the state a new rank needs), and the loop finishes on
 * NRANKS ranks. The launcher then checks that the victim died of SIGKILL, that every other
 * process exited 0, and that no ringcc segment of any of them is left in /dev/shm.
 *
 *   elastic [nranks [iterations]]      (defaults: 4 ranks, 12 iterations; nranks >= 3)
 *
 * The launcher is a small stand-in for a job manager (torchrun's elastic agent, say): it
 * starts every rank as a fresh exec of this program (posix_spawn: safe from a process with
 * threads, which ncclGetUniqueId starts), watches them (waitpid), tells the survivors who died
 * (one pipe per rank, fd 3) and carries the grow id from rank 0 to the replacement (a pipe from
 * the ranks, fd 4; then the replacement's command line). Set NCCL_BOOTSTRAP_TIMEOUT to bound
 * how long the survivors wait for the replacement.
 *
 *   cc -std=c11 examples/elastic.c $(pkg-config --cflags --libs nccl) -o elastic && ./elastic
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

#define COUNT 65536  /* floats per all-reduce */
#define KILL_AT 3    /* the victim dies before this iteration's all-reduce */
#define GROW_AFTER 3 /* iterations on the shrunk communicator before growing back */
#define VICTIM 1     /* the original rank that dies */
#define CTL_IN 3     /* a rank's fd: from the launcher (who died) */
#define CTL_OUT 4    /* a rank's fd: to the launcher (the grow id) */
#define LIMIT_S 120  /* the launcher kills everything after this */
#define MAX_PROCS 64

static double nowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* ---- what ranks and launcher tell each other ------------------------------------------ */

struct GrowMsg {
  int32_t newRank; /* the rank the replacement takes */
  int32_t nranks;  /* the size after the grow */
  ncclUniqueId id;
};

static void toHex(const ncclUniqueId* id, char* out) {
  const unsigned char* b = (const unsigned char*)id;
  for (size_t i = 0; i < sizeof(*id); ++i) sprintf(out + 2 * i, "%02x", b[i]);
}

static int fromHex(const char* s, ncclUniqueId* id) {
  unsigned char* b = (unsigned char*)id;
  if (strlen(s) != 2 * sizeof(*id)) return -1;
  for (size_t i = 0; i < sizeof(*id); ++i) {
    unsigned v;
    if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
    b[i] = (unsigned char)v;
  }
  return 0;
}

/* Reads exactly n bytes within timeoutMs; 0 on success. */
static int readFull(int fd, void* buf, size_t n, int timeoutMs) {
  size_t got = 0;
  double deadline = nowMs() + timeoutMs;
  while (got < n) {
    struct pollfd p = {fd, POLLIN, 0};
    int left = (int)(deadline - nowMs());
    if (left <= 0 || poll(&p, 1, left) <= 0) return -1;
    ssize_t k = read(fd, (char*)buf + got, n - got);
    if (k <= 0) {
      if (k < 0 && errno == EINTR) continue;
      return -1;
    }
    got += (size_t)k;
  }
  return 0;
}

/* ---- one rank ---------------------------------------------------------------------------- */

#define RANK_CHECK(call)                                                                           \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess) {                                                                       \
      fprintf(stderr, "elastic[%d]: %s failed: %s: %s\n", getpid(), #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                                             \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

/* Rank `rank` of n's input at iteration `it`: small integers, so every sum is exact. */
static float inputOf(int rank, int it, int i) { return (float)((rank + 1) * (i % 7 + 1) + it); }

static int resultWrong(const float* out, int n, int it) {
  int wrong = 0;
  for (int i = 0; i < COUNT; ++i) {
    float want = (float)(n * (n + 1) / 2 * (i % 7 + 1) + n * it);
    wrong += out[i] != want;
  }
  return wrong;
}

static int runRank(int origRank, int nranks, int iters, const ncclUniqueId* id, int joining) {
  ncclComm_t comm = NULL;
  int rank, n, it = 0, shrunkAt = -1, grown = joining;
  float* send = malloc(COUNT * sizeof(float));
  float* recv = malloc(COUNT * sizeof(float));
  if (!send || !recv) return 1;
  if (joining) {
    /* A replacement: comm NULL, the grow id, the rank it takes. */
    RANK_CHECK(ncclCommGrow(NULL, nranks, id, origRank, &comm, NULL));
    int resume = 0;
    RANK_CHECK(ncclBroadcast(&resume, &resume, 1, ncclInt32, 0, comm, NULL));
    it = resume;
    printf("elastic: replacement joined as rank %d of %d at iteration %d\n", origRank, nranks, it);
  } else {
    RANK_CHECK(ncclCommInitRank(&comm, nranks, *id, origRank));
  }
  RANK_CHECK(ncclCommUserRank(comm, &rank));
  RANK_CHECK(ncclCommCount(comm, &n));
  while (it < iters) {
    if (!joining && origRank == VICTIM && it == KILL_AT) raise(SIGKILL);
    for (int i = 0; i < COUNT; ++i) send[i] = inputOf(rank, it, i);
    double t0 = nowMs();
    ncclResult_t rc = ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, NULL);
    if (rc != ncclSuccess) {
      /* A peer is gone. The launcher says which; shrink it out, redo the iteration. */
      printf("elastic: rank %d: iteration %d failed after %.0f ms: %s\n", rank, it, nowMs() - t0,
             ncclGetErrorString(rc));
      if (shrunkAt >= 0) return 1; /* one failure is the scenario; a second is not */
      int32_t dead = -1;
      if (readFull(CTL_IN, &dead, sizeof(dead), 60000) != 0) {
        fprintf(stderr, "elastic: rank %d: no word from the launcher on who died\n", rank);
        return 1;
      }
      ncclComm_t small = NULL;
      int exclude = dead; /* the original ranks are the ranks of the first communicator */
      RANK_CHECK(ncclCommShrink(comm, &exclude, 1, &small, NULL, NCCL_SHRINK_ABORT));
      RANK_CHECK(ncclCommAbort(comm));
      comm = small;
      RANK_CHECK(ncclCommUserRank(comm, &rank));
      RANK_CHECK(ncclCommCount(comm, &n));
      printf("elastic: rank %d: shrunk to %d ranks without rank %d\n", rank, n, dead);
      shrunkAt = it;
      continue;
    }
    int wrong = resultWrong(recv, n, it);
    if (wrong) {
      fprintf(stderr, "elastic: rank %d: iteration %d on %d ranks: %d wrong values\n", rank, it, n,
              wrong);
      return 1;
    }
    ++it;
    if (shrunkAt >= 0 && !grown && it == shrunkAt + GROW_AFTER) {
      /* Grow back: rank 0 makes the id, the launcher starts the replacement with it. */
      ncclUniqueId growId;
      if (rank == 0) {
        RANK_CHECK(ncclCommGetUniqueId(comm, &growId));
        struct GrowMsg m = {n, nranks, growId};
        if (write(CTL_OUT, &m, sizeof(m)) != (ssize_t)sizeof(m)) return 1;
      }
      ncclComm_t big = NULL;
      RANK_CHECK(ncclCommGrow(comm, nranks, rank == 0 ? &growId : NULL, -1, &big, NULL));
      RANK_CHECK(ncclCommDestroy(comm));
      comm = big;
      int resume = it;
      RANK_CHECK(ncclBroadcast(&resume, &resume, 1, ncclInt32, 0, comm, NULL));
      RANK_CHECK(ncclCommUserRank(comm, &rank));
      RANK_CHECK(ncclCommCount(comm, &n));
      if (rank == 0) printf("elastic: grew back to %d ranks at iteration %d\n", n, it);
      grown = 1;
    }
  }
  int final = n;
  RANK_CHECK(ncclCommDestroy(comm));
  free(send);
  free(recv);
  if (final != nranks || (!joining && shrunkAt < 0)) {
    fprintf(stderr, "elastic: rank %d ended on %d ranks (shrunk at %d)\n", rank, final, shrunkAt);
    return 1;
  }
  return 0;
}

/* ---- the launcher ------------------------------------------------------------------------ */

struct Proc {
  pid_t pid;
  int origRank;
  int ctl; /* the launcher's end of the rank's CTL_IN pipe */
  int status;
  int done;
};

/* A pipe whose ends are above the fds a rank gets (so posix_spawn's dup2 always moves them),
 * close-on-exec. */
static int highPipe(int fds[2]) {
  int raw[2];
  if (pipe(raw) != 0) return -1;
  for (int i = 0; i < 2; ++i) {
    fds[i] = fcntl(raw[i], F_DUPFD_CLOEXEC, 10);
    close(raw[i]);
    if (fds[i] < 0) return -1;
  }
  return 0;
}

static int spawnRank(struct Proc* p, int origRank, int nranks, int iters, const ncclUniqueId* id,
                     int joining, int upWrite) {
  int down[2];
  if (highPipe(down) != 0) return -1;
  char rankS[16], nS[16], itS[16], idS[2 * sizeof(ncclUniqueId) + 1];
  snprintf(rankS, sizeof rankS, "%d", origRank);
  snprintf(nS, sizeof nS, "%d", nranks);
  snprintf(itS, sizeof itS, "%d", iters);
  toHex(id, idS);
  char* argv[] = {"elastic", joining ? "--join" : "--rank", rankS, nS, itS, idS, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, down[0], CTL_IN);
  posix_spawn_file_actions_adddup2(&fa, upWrite, CTL_OUT);
  int rc = posix_spawn(&p->pid, "/proc/self/exe", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(down[0]);
  if (rc != 0) {
    fprintf(stderr, "elastic: posix_spawn failed: %s\n", strerror(rc));
    close(down[1]);
    return -1;
  }
  p->origRank = origRank;
  p->ctl = down[1];
  p->done = 0;
  return 0;
}

/* ringcc names its shm segments ringcc-<pid>-...: any left by our processes? */
static int leftSegments(const struct Proc* procs, int nprocs) {
  DIR* d = opendir("/dev/shm");
  if (!d) return 0;
  int left = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    for (int i = 0; i < nprocs; ++i) {
      char prefix[32];
      snprintf(prefix, sizeof prefix, "ringcc-%d-", (int)procs[i].pid);
      if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
        fprintf(stderr, "elastic: left in /dev/shm: %s\n", e->d_name);
        ++left;
      }
    }
  }
  closedir(d);
  return left;
}

static int launch(int nranks, int iters) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  int up[2];
  if (highPipe(up) != 0) return 1;
  struct Proc procs[MAX_PROCS];
  int nprocs = 0, replaced = 0;
  for (int r = 0; r < nranks; ++r)
    if (spawnRank(&procs[nprocs++], r, nranks, iters, &id, 0, up[1]) != 0) return 1;
  double deadline = nowMs() + LIMIT_S * 1e3;
  int running = nprocs;
  while (running > 0 && nowMs() < deadline) {
    struct pollfd p = {up[0], POLLIN, 0};
    if (poll(&p, 1, 20) > 0) {
      struct GrowMsg m;
      if (readFull(up[0], &m, sizeof(m), 1000) != 0 || nprocs == MAX_PROCS) break;
      if (spawnRank(&procs[nprocs], m.newRank, m.nranks, iters, &m.id, 1, up[1]) != 0) break;
      printf("elastic: launcher started a replacement as rank %d (pid %d)\n", m.newRank,
             (int)procs[nprocs].pid);
      ++nprocs;
      ++running;
      ++replaced;
    }
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (int i = 0; i < nprocs; ++i) {
        if (procs[i].pid != pid) continue;
        procs[i].status = status;
        procs[i].done = 1;
        --running;
        if (WIFSIGNALED(status)) {
          /* Tell every original rank still running who died: they shrink it out. */
          int32_t dead = procs[i].origRank;
          printf("elastic: launcher: rank %d (pid %d) died of signal %d\n", dead, (int)pid,
                 WTERMSIG(status));
          for (int j = 0; j < nprocs; ++j)
            if (!procs[j].done && write(procs[j].ctl, &dead, sizeof(dead)) != sizeof(dead))
              perror("elastic: write");
        }
      }
    }
  }
  int failures = 0;
  for (int i = 0; i < nprocs; ++i) {
    if (!procs[i].done) {
      fprintf(stderr, "elastic: pid %d still running after %d s; killed\n", (int)procs[i].pid,
              LIMIT_S);
      kill(procs[i].pid, SIGKILL);
      waitpid(procs[i].pid, &procs[i].status, 0);
      ++failures;
      continue;
    }
    int isVictim = i == VICTIM;
    int ok = isVictim ? WIFSIGNALED(procs[i].status) && WTERMSIG(procs[i].status) == SIGKILL
                      : WIFEXITED(procs[i].status) && WEXITSTATUS(procs[i].status) == 0;
    if (!ok) {
      fprintf(stderr, "elastic: %s %d (pid %d) ended with status 0x%x\n",
              i < nranks ? "rank" : "replacement", procs[i].origRank, (int)procs[i].pid,
              procs[i].status);
      ++failures;
    }
    close(procs[i].ctl);
  }
  if (replaced != 1) {
    fprintf(stderr, "elastic: %d replacements started, expected 1\n", replaced);
    ++failures;
  }
  failures += leftSegments(procs, nprocs);
  if (failures) {
    fprintf(stderr, "elastic: FAILED (%d problems)\n", failures);
    return 1;
  }
  printf(
      "elastic: %d ranks, rank %d killed at iteration %d, shrunk to %d, grew back to %d; "
      "%d iterations exact; /dev/shm clean: OK\n",
      nranks, VICTIM, KILL_AT, nranks - 1, nranks, iters);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 6 && (strcmp(argv[1], "--rank") == 0 || strcmp(argv[1], "--join") == 0)) {
    ncclUniqueId id;
    if (fromHex(argv[5], &id) != 0) return 2;
    return runRank(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), &id,
                   strcmp(argv[1], "--join") == 0);
  }
  int nranks = argc > 1 ? atoi(argv[1]) : 4;
  int iters = argc > 2 ? atoi(argv[2]) : 12;
  if (nranks < 3 || nranks > MAX_PROCS - 1 || iters < KILL_AT + GROW_AFTER + 1) {
    fprintf(stderr, "usage: elastic [nranks >= 3 [iterations > %d]]\n", KILL_AT + GROW_AFTER);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  return launch(nranks, iters);
}
