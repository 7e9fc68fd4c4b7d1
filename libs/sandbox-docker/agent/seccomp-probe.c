/*
 * seccomp-probe: calls each syscall the sandbox's seccomp profile refuses (seccomp/README.md) once
 * and prints one line per call, `<name> <answer>`: the errno's name (`EPERM`, `ENOSYS`, …) or `ok`.
 * Then it does what ordinary programs do (write, a plain fork and wait) and exits 0.
 *
 * The arguments are chosen so that without the profile each call answers something other than
 * EPERM where the kernel allows it — a bad pointer (EFAULT), a bad descriptor (EBADF), a bad flag
 * (EINVAL), a pid that does not exist (ESRCH) — so an EPERM is seccomp's, not the kernel's. Five
 * calls (fsopen, fsmount, move_mount, fspick, pivot_root) check CAP_SYS_ADMIN before anything
 * else and answer EPERM either way without it; the int test runs the probe with that capability
 * too. Nothing here changes anything outside the probe's own process: calls that would succeed
 * create at most a namespace or a descriptor of its own, or a child that exits at once.
 *
 * Freestanding (no libc): a few kilobytes, so it travels as an input file inside a RunSpec, whose
 * JSON body the gateway caps at 1 MiB. Built by agent/build.sh with the host's C compiler.
 */
#include <asm/unistd.h>
#include <linux/sched.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)
static long sys6(long n, long a, long b, long c, long d, long e, long f) {
  long ret;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9) : "rcx", "r11", "memory");
  return ret;
}
__asm__(".text\n.global _start\n_start:\n xor %rbp,%rbp\n and $-16,%rsp\n call probe_main\n hlt\n");
#elif defined(__aarch64__)
static long sys6(long n, long a, long b, long c, long d, long e, long f) {
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
  return x0;
}
__asm__(".text\n.global _start\n_start:\n mov x29, #0\n bl probe_main\n brk #0\n");
#else
#error "seccomp-probe: only x86_64 and aarch64"
#endif

#define S0(n) sys6((n), 0, 0, 0, 0, 0, 0)
#define S1(n, a) sys6((n), (long)(a), 0, 0, 0, 0, 0)
#define S2(n, a, b) sys6((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define S3(n, a, b, c) sys6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define S4(n, a, b, c, d) sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define S5(n, a, b, c, d, e) sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

/* Constants this probe needs, spelled out: the uapi headers of older systems may lack them. */
#define P_SIGCHLD 17
#define P_AT_FDCWD (-100)
#define P_PTRACE_PEEKDATA 2
#define P_UFFD_USER_MODE_ONLY 1
#define P_FSCONFIG_SET_FLAG 0
#define P_CLONE_NEWUSER 0x10000000L
#define BAD_POINTER ((long)-4096L)

static const char *const ERRNO_NAMES[] = {
    [1] = "EPERM", [2] = "ENOENT", [3] = "ESRCH", [9] = "EBADF", [12] = "ENOMEM", [13] = "EACCES", [14] = "EFAULT",
    [16] = "EBUSY", [17] = "EEXIST", [22] = "EINVAL", [28] = "ENOSPC", [38] = "ENOSYS", [95] = "EOPNOTSUPP", [126] = "ENOKEY",
};

/* The compiler may call memset for the zeroed structs below; there is no libc to provide it. */
void *memset(void *dst, int c, size_t n) {
  unsigned char *p = dst;
  while (n-- > 0) *p++ = (unsigned char)c;
  return dst;
}

static size_t length(const char *s) {
  size_t n = 0;
  while (s[n] != '\0') n++;
  return n;
}

static void put(const char *s) { S3(__NR_write, 1, s, length(s)); }

static void put_number(long v) {
  char digits[24];
  int at = (int)sizeof digits;
  digits[--at] = '\0';
  do {
    digits[--at] = (char)('0' + v % 10);
    v /= 10;
  } while (v > 0 && at > 0);
  put(&digits[at]);
}

/* One line: the call's name and how it answered. A descriptor it got is closed again. */
static void report(const char *name, long ret, int is_fd) {
  put(name);
  put(" ");
  if (ret >= 0) {
    put("ok");
    if (is_fd) S1(__NR_close, ret);
  } else {
    long e = -ret;
    if (e < (long)(sizeof ERRNO_NAMES / sizeof ERRNO_NAMES[0]) && ERRNO_NAMES[e] != NULL) {
      put(ERRNO_NAMES[e]);
    } else {
      put("errno");
      put_number(e);
    }
  }
  put("\n");
}

/* A child made by a clone that succeeded exits at once; the parent reaps it. */
static long clone_and_reap(long ret) {
  if (ret == 0) S1(__NR_exit_group, 0);
  if (ret > 0) S4(__NR_wait4, ret, 0, 0, 0);
  return ret;
}

void probe_main(void) {
  uint32_t uring_params[30] = {0}; /* struct io_uring_params is 120 bytes */
  report("io_uring_setup", S2(__NR_io_uring_setup, 1, uring_params), 1);
  report("io_uring_enter", sys6(__NR_io_uring_enter, -1, 0, 0, 0, 0, 0), 0);
  report("io_uring_register", S4(__NR_io_uring_register, -1, 0, 0, 0), 0);
  report("ptrace", S4(__NR_ptrace, P_PTRACE_PEEKDATA, 0x3ffffff0, 0, 0), 0);
  report("keyctl", S2(__NR_keyctl, 9999, 0), 0);
  report("add_key", S5(__NR_add_key, BAD_POINTER, BAD_POINTER, 0, 0, -2), 0);
  report("request_key", S4(__NR_request_key, BAD_POINTER, BAD_POINTER, 0, -2), 0);
  report("bpf", S3(__NR_bpf, 9999, 0, 0), 0);
  report("userfaultfd", S1(__NR_userfaultfd, P_UFFD_USER_MODE_ONLY | 0x40000000L), 1);
  report("perf_event_open", S5(__NR_perf_event_open, BAD_POINTER, 0, -1, -1, 0), 1);
  report("mount", S5(__NR_mount, 0, BAD_POINTER, 0, 0, 0), 0);
  report("umount2", S2(__NR_umount2, "/", 0x40000000L), 0);
  report("mount_setattr", S5(__NR_mount_setattr, -1, "", 0, 0, 0), 0);
  report("open_tree", S3(__NR_open_tree, P_AT_FDCWD, BAD_POINTER, 0), 1);
  report("fsconfig", S5(__NR_fsconfig, -1, P_FSCONFIG_SET_FLAG, "ro", 0, 0), 0);
  report("fsopen", S2(__NR_fsopen, "tmpfs", 0), 1);
  report("fsmount", S3(__NR_fsmount, -1, 0, 0), 1);
  report("move_mount", S5(__NR_move_mount, -1, "", P_AT_FDCWD, "/tmp", 0), 0);
  report("fspick", S3(__NR_fspick, P_AT_FDCWD, "/tmp", 0), 1);
  report("pivot_root", S2(__NR_pivot_root, BAD_POINTER, BAD_POINTER), 0);
  report("clone_newuser", clone_and_reap(S5(__NR_clone, P_CLONE_NEWUSER | P_SIGCHLD, 0, 0, 0, 0)), 0);
  struct clone_args args = {0};
  args.flags = (uint64_t)P_CLONE_NEWUSER;
  args.exit_signal = P_SIGCHLD;
  report("clone3_newuser", clone_and_reap(S2(__NR_clone3, &args, sizeof args)), 0);
  /* Last: a new user namespace, should it be granted, changes nothing the calls above see. */
  report("unshare_newuser", S1(__NR_unshare, P_CLONE_NEWUSER), 0);
  /* What every program does: a plain fork (clone without namespace flags) and a wait. */
  report("clone_plain", clone_and_reap(S5(__NR_clone, P_SIGCHLD, 0, 0, 0, 0)), 0);
  report("getpid", S0(__NR_getpid), 0);
  put("done\n");
  S1(__NR_exit_group, 0);
  for (;;) {
  }
}
