/*
 * cairn-agent: runs a sandbox's commands for the runtime on the host, over one unix-socket
 * connection the agent opens as the sandbox's main process (see docs/adr/0005-exec-agent.md).
 *
 *   cairn-agent <socket-path> <lifetime-seconds>      the sandbox's main process (token on stdin)
 *   cairn-agent --measure <entry>...                  what a file transfer would archive (no root)
 *   cairn-agent --put-secrets <dir>                   a run's secrets from stdin, run as root by the host
 *
 * It reads a per-sandbox token from its stdin (written by the host through the engine, never in
 * argv or the environment), connects once, before any untrusted code runs, to a socket the host
 * listens on (bind-mounted read-only), says hello and presents the token, then runs one command at
 * a time: fork, setsid, chdir, exec with the given argv and environment, stdout and stderr relayed
 * as frames, the wait status last. It exits when the connection closes or the lifetime passes,
 * which stops the sandbox like the `sleep` it replaces. It is not dumpable, so the sandbox's own
 * processes (same uid) cannot ptrace it or read its memory. Everything else — caps, timeouts,
 * teardown — stays the host's job.
 *
 * Frames, both ways: 1 byte type, 4 bytes big-endian length, payload.
 *   host → agent  'X' exec: flags byte (1 = stdin follows), then NUL-terminated strings:
 *                     workdir, argc, argv..., envc, env...
 *                 'I' stdin bytes; 'i' end of stdin; 'K' kill the running command (its session)
 *   agent → host  'H' hello ("cairn-agent/2"); 'A' the token (right after the hello);
 *                 'P' started (pid, decimal); 'O' stdout; 'E' stderr;
 *                 'W' done: exit code (decimal; 128 + signal when killed by one)
 * Malformed input from the host ends the agent: it never guesses.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_FRAME (64u * 1024u * 1024u)
#define CHUNK 65536
#define DRAIN_IDLE_MS 50
#define TOKEN_HEX 64
#define SECRETS_MAX_INPUT (4u * 1024u * 1024u)
#define SECRET_MAX_BYTES (32u * 1024u)
#define SECRETS_MAX_COUNT 64

extern char **environ;

static int sock = -1;

static void die(const char *what) {
  dprintf(2, "cairn-agent: %s: %s\n", what, strerror(errno));
  _exit(70);
}

static void write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      _exit(71); /* the host went away */
    }
    p += n;
    len -= (size_t)n;
  }
}

static void send_frame(char type, const void *payload, uint32_t len) {
  unsigned char header[5] = {(unsigned char)type, (unsigned char)(len >> 24), (unsigned char)(len >> 16), (unsigned char)(len >> 8), (unsigned char)len};
  write_all(sock, header, sizeof header);
  if (len > 0) write_all(sock, payload, len);
}

static void send_text(char type, const char *text) { send_frame(type, text, (uint32_t)strlen(text)); }

/* Reads exactly len bytes; 0 on a clean close before the first byte, -1 on a close mid-way. */
static int read_exact(int fd, void *buf, size_t len) {
  char *p = buf;
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(fd, p + got, len - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) return got == 0 ? 0 : -1;
    got += (size_t)n;
  }
  return 1;
}

/* One frame from the host; exits the agent on a close or a malformed frame. */
static char *read_frame(char *type, uint32_t *len) {
  unsigned char header[5];
  int r = read_exact(sock, header, sizeof header);
  if (r == 0) _exit(0);
  if (r < 0) _exit(72);
  *type = (char)header[0];
  *len = ((uint32_t)header[1] << 24) | ((uint32_t)header[2] << 16) | ((uint32_t)header[3] << 8) | header[4];
  if (*len > MAX_FRAME) _exit(73);
  char *payload = malloc(*len + 1);
  if (payload == NULL) _exit(74);
  if (*len > 0 && read_exact(sock, payload, *len) != 1) _exit(72);
  payload[*len] = '\0';
  return payload;
}

/* Splits a NUL-separated payload into its strings: the pointers of strings[0..count). */
static char **split(char *payload, uint32_t len, size_t *count) {
  size_t n = 0;
  for (uint32_t i = 0; i < len; i++) n += payload[i] == '\0';
  char **parts = calloc(n + 1, sizeof *parts);
  if (parts == NULL) _exit(74);
  size_t k = 0;
  char *start = payload;
  for (uint32_t i = 0; i < len; i++) {
    if (payload[i] == '\0') {
      parts[k++] = start;
      start = payload + i + 1;
    }
  }
  *count = n;
  return parts;
}

static long parse_count(const char *text) {
  char *end = NULL;
  errno = 0;
  long value = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < 0 || value > 1000000) _exit(73);
  return value;
}

static void set_flags(int fd, int nonblock) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, nonblock ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) < 0) die("fcntl");
}

/* Runs in the child: never returns. */
static void become(char **argv, char **envp, const char *workdir, int in_fd, int out_fd, int err_fd, sigset_t *old_mask) {
  if (setsid() < 0) _exit(126);
  if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) _exit(126);
  for (int sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);
  sigprocmask(SIG_SETMASK, old_mask, NULL);
  if (chdir(workdir) < 0) {
    dprintf(2, "cairn-agent: cannot enter %s: %s\n", workdir, strerror(errno));
    _exit(126);
  }
  environ = envp;
  execvp(argv[0], argv);
  int code = errno == ENOENT ? 127 : 126;
  dprintf(2, "cairn-agent: cannot run %s: %s\n", argv[0], strerror(errno));
  _exit(code);
}

static int relay(int fd, char type, char *buf) {
  ssize_t n = read(fd, buf, CHUNK);
  if (n > 0) {
    send_frame(type, buf, (uint32_t)n);
    return 1;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 1;
  return 0; /* end of file (or an error: the same for us) */
}

static void run_command(char *payload, uint32_t len, int sigfd, sigset_t *old_mask) {
  if (len < 1) _exit(73);
  int with_stdin = payload[0] == 1;
  size_t count = 0;
  char **parts = split(payload + 1, len - 1, &count);
  size_t at = 0;
  if (count < 2) _exit(73);
  const char *workdir = parts[at++];
  long argc = parse_count(parts[at++]);
  if (argc < 1 || (size_t)argc > count - at) _exit(73);
  char **argv = calloc((size_t)argc + 1, sizeof *argv);
  for (long i = 0; i < argc; i++) argv[i] = parts[at++];
  if (at >= count) _exit(73);
  long envc = parse_count(parts[at++]);
  if ((size_t)envc != count - at) _exit(73);
  char **envp = calloc((size_t)envc + 1, sizeof *envp);
  for (long i = 0; i < envc; i++) envp[i] = parts[at++];

  int in_pipe[2] = {-1, -1}, out_pipe[2], err_pipe[2];
  int null_fd = -1;
  if (with_stdin) {
    if (pipe2(in_pipe, O_CLOEXEC) < 0) die("pipe");
  } else if ((null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
    die("open /dev/null");
  }
  if (pipe2(out_pipe, O_CLOEXEC) < 0 || pipe2(err_pipe, O_CLOEXEC) < 0) die("pipe");

  pid_t pid = fork();
  if (pid < 0) {
    /* The pids cap can refuse even this: report it as the shell would, and go on serving. */
    char message[128];
    snprintf(message, sizeof message, "cairn-agent: cannot start a process: %s\n", strerror(errno));
    send_text('E', message);
    send_text('W', "126");
    goto cleanup_fail;
  }
  if (pid == 0) become(argv, envp, workdir, with_stdin ? in_pipe[0] : null_fd, out_pipe[1], err_pipe[1], old_mask);

  char started[32];
  snprintf(started, sizeof started, "%d", (int)pid);
  send_text('P', started);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (with_stdin) close(in_pipe[0]);
  else close(null_fd);
  set_flags(out_pipe[0], 1);
  set_flags(err_pipe[0], 1);
  int in_fd = with_stdin ? in_pipe[1] : -1;
  if (in_fd >= 0) set_flags(in_fd, 1);

  char *buf = malloc(CHUNK);
  char *pending = NULL; /* stdin the child has not taken yet */
  uint32_t pending_len = 0, pending_off = 0;
  int out_open = 1, err_open = 1, exited = 0, status = 0, stdin_done = !with_stdin, killed = 0;

  while (!exited || out_open || err_open) {
    struct pollfd fds[5];
    int n = 0, i_out = -1, i_err = -1, i_sock = -1, i_in = -1, i_sig = -1;
    if (out_open) { i_out = n; fds[n++] = (struct pollfd){.fd = out_pipe[0], .events = POLLIN}; }
    if (err_open) { i_err = n; fds[n++] = (struct pollfd){.fd = err_pipe[0], .events = POLLIN}; }
    if (!exited) { i_sig = n; fds[n++] = (struct pollfd){.fd = sigfd, .events = POLLIN}; }
    if (in_fd >= 0 && pending_len > pending_off) { i_in = n; fds[n++] = (struct pollfd){.fd = in_fd, .events = POLLOUT}; }
    /* The host is heard while the command runs (stdin, or a kill); more stdin only once the child took the last. */
    if (!exited && (in_fd < 0 || pending_len == pending_off)) { i_sock = n; fds[n++] = (struct pollfd){.fd = sock, .events = POLLIN}; }
    /* After the exit, output still held open by a background child gets a short grace, not forever. */
    int ready = poll(fds, (nfds_t)n, exited ? DRAIN_IDLE_MS : -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      die("poll");
    }
    if (ready == 0) break;
    if (i_out >= 0 && fds[i_out].revents) out_open = relay(out_pipe[0], 'O', buf);
    if (i_err >= 0 && fds[i_err].revents) err_open = relay(err_pipe[0], 'E', buf);
    if (i_sig >= 0 && fds[i_sig].revents) {
      struct signalfd_siginfo info;
      while (read(sigfd, &info, sizeof info) > 0) {}
      if (waitpid(pid, &status, WNOHANG) == pid) exited = 1;
    }
    if (i_in >= 0 && fds[i_in].revents) {
      ssize_t w = write(in_fd, pending + pending_off, pending_len - pending_off);
      if (w > 0) pending_off += (uint32_t)w;
      else if (w < 0 && errno != EAGAIN && errno != EINTR) { close(in_fd); in_fd = -1; } /* the child closed its stdin */
    }
    if (i_sock >= 0 && fds[i_sock].revents) {
      char type;
      uint32_t flen;
      char *data = read_frame(&type, &flen);
      if (type == 'I' && !stdin_done) {
        if (in_fd >= 0) {
          free(pending);
          pending = data;
          pending_len = flen;
          pending_off = 0;
        } else {
          free(data); /* the child closed its stdin: the rest goes nowhere */
        }
        continue;
      }
      free(data);
      if (type == 'K') {
        /* The host wants no more of it (a transfer over its bound): its session dies, its output is not read. */
        if (!killed) {
          kill(-pid, SIGKILL);
          kill(pid, SIGKILL);
          killed = 1;
          out_open = 0;
          err_open = 0;
        }
        continue;
      }
      if (type != 'i' || stdin_done) _exit(73);
      stdin_done = 1;
      if (in_fd >= 0) close(in_fd);
      in_fd = -1;
    }
  }
  /* Stdin the child never took is still on its way: read it off up to its end, so it is not taken for a command. */
  while (!stdin_done) {
    char type;
    uint32_t flen;
    free(read_frame(&type, &flen));
    if (type == 'i') stdin_done = 1;
    else if (type != 'I' && type != 'K') _exit(73);
  }
  if (!exited) waitpid(pid, &status, 0);
  if (in_fd >= 0) close(in_fd);
  close(out_pipe[0]);
  close(err_pipe[0]);
  free(buf);
  free(pending);

  char done[16];
  snprintf(done, sizeof done, "%d", WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status));
  send_text('W', done);
  free(argv);
  free(envp);
  free(parts);
  return;

cleanup_fail:
  while (with_stdin) { /* the stdin that was meant for it */
    char type;
    uint32_t flen;
    free(read_frame(&type, &flen));
    if (type == 'i') break;
    if (type != 'I' && type != 'K') _exit(73);
  }
  if (with_stdin) { close(in_pipe[0]); close(in_pipe[1]); } else close(null_fd);
  close(out_pipe[0]); close(out_pipe[1]); close(err_pipe[0]); close(err_pipe[1]);
  free(argv);
  free(envp);
  free(parts);
}

/* --- --measure: what `tar -c` of the entries would hold, before any of it is streamed ----------- */

static unsigned long long m_files, m_dirs, m_links, m_others, m_bytes;
static char m_other_kind[16];
static char m_other_path[4096];

static void note_other(const char *kind, const char *path) {
  if (m_others++ > 0) return;
  snprintf(m_other_kind, sizeof m_other_kind, "%s", kind);
  snprintf(m_other_path, sizeof m_other_path, "%s", path);
}

static int measure_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)ftw;
  if (flag == FTW_NS) note_other("unreadable", path);
  else if (flag == FTW_DNR) note_other("unreadable", path);
  else if (S_ISREG(st->st_mode)) {
    m_files++;
    m_bytes += (unsigned long long)st->st_size;
    if (access(path, R_OK) != 0) note_other("unreadable", path);
  } else if (S_ISDIR(st->st_mode)) m_dirs++;
  else if (S_ISLNK(st->st_mode)) m_links++;
  else if (S_ISFIFO(st->st_mode)) note_other("fifo", path);
  else if (S_ISSOCK(st->st_mode)) note_other("socket", path);
  else if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) note_other("device", path);
  else note_other("unknown", path);
  return 0;
}

/*
 * Prints "cairn-measure/1 <files> <dirs> <links> <others> <bytes>\n", then for the first entry that
 * is none of those "<kind>\0<path>\0". Sizes are the files' apparent sizes (a sparse 1 TiB file is
 * 1 TiB): the host refuses a transfer over its bound from this, before a byte of it moves.
 * Entries are paths under / without their leading slash, as the archive names them; links are
 * never followed and nothing crosses into another file system.
 */
static int measure(int count, char **entries) {
  char path[4096];
  for (int i = 0; i < count; i++) {
    if (snprintf(path, sizeof path, "/%s", entries[i]) >= (int)sizeof path) return 64;
    struct stat st;
    if (lstat(path, &st) != 0) continue; /* absent: nothing to archive */
    if (nftw(path, measure_one, 16, FTW_PHYS | FTW_MOUNT) != 0) note_other("unreadable", path);
  }
  printf("cairn-measure/1 %llu %llu %llu %llu %llu\n", m_files, m_dirs, m_links, m_others, m_bytes);
  if (m_others > 0) {
    fwrite(m_other_kind, 1, strlen(m_other_kind) + 1, stdout);
    fwrite(m_other_path, 1, strlen(m_other_path) + 1, stdout);
  }
  return fflush(stdout) == 0 ? 0 : 71;
}

/* --- --put-secrets: a run's secrets into their tmpfs, without anything of the image ------------- */

static int secret_name_ok(const char *name) {
  size_t len = strlen(name);
  if (len < 1 || len > 64) return 0;
  if (!(name[0] == '_' || (name[0] >= 'A' && name[0] <= 'Z'))) return 0;
  for (size_t i = 1; i < len; i++) {
    char c = name[i];
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return 0;
  }
  return 1;
}

static int refuse(const char *what) {
  dprintf(2, "cairn-agent: put-secrets: %s\n", what);
  return 65;
}

/*
 * Reads "<NAME>\0<length>\0<bytes>" records from stdin (the whole input, bounded, checked before
 * anything is written), then writes each as <dir>/<NAME>: created afresh (O_EXCL, never through a
 * link), mode 0440, owned by this process (root, with the sandbox's group as its group). The
 * directory must be root's own, mode 0750, of that group. Anything wrong writes nothing; a write
 * that fails half-way removes what it wrote. The host runs this as root over `docker exec`: it is
 * the one root process in a sandbox, and it runs nothing from the image.
 */
static int put_secrets(const char *dir) {
  char *input = malloc(SECRETS_MAX_INPUT + 1);
  if (input == NULL) return 74;
  size_t len = 0;
  for (;;) {
    ssize_t n = read(0, input + len, SECRETS_MAX_INPUT + 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refuse("cannot read stdin");
    if (n == 0) break;
    len += (size_t)n;
    if (len > SECRETS_MAX_INPUT) return refuse("input too large");
  }
  const char *names[SECRETS_MAX_COUNT];
  const char *values[SECRETS_MAX_COUNT];
  size_t sizes[SECRETS_MAX_COUNT];
  int count = 0;
  size_t at = 0;
  while (at < len) {
    if (count == SECRETS_MAX_COUNT) return refuse("too many secrets");
    const char *name = input + at;
    const char *end = memchr(name, '\0', len - at);
    if (end == NULL) return refuse("malformed record");
    at = (size_t)(end - input) + 1;
    const char *size_text = input + at;
    const char *size_end = memchr(size_text, '\0', len - at);
    if (size_end == NULL || size_end == size_text || size_end - size_text > 6) return refuse("malformed record");
    size_t size = 0;
    for (const char *c = size_text; c < size_end; c++) {
      if (*c < '0' || *c > '9') return refuse("malformed record");
      size = size * 10 + (size_t)(*c - '0');
    }
    at = (size_t)(size_end - input) + 1;
    if (!secret_name_ok(name)) return refuse("not a secret name");
    if (size > SECRET_MAX_BYTES || size > len - at) return refuse("malformed record");
    for (int i = 0; i < count; i++) if (strcmp(names[i], name) == 0) return refuse("a name given twice");
    names[count] = name;
    values[count] = input + at;
    sizes[count] = size;
    count++;
    at += size;
  }

  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return refuse("cannot open the secrets directory");
  struct stat st;
  if (fstat(dfd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 || st.st_uid != geteuid() || st.st_gid != getegid() || (st.st_mode & 07777) != 0750) {
    return refuse("the secrets directory is not root's own, 0750, of the sandbox's group");
  }
  int written = 0, failed = 0;
  for (int i = 0; i < count && !failed; i++) {
    if (unlinkat(dfd, names[i], 0) != 0 && errno != ENOENT) { failed = 1; break; }
    int fd = openat(dfd, names[i], O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
    if (fd < 0) { failed = 1; break; }
    written = i + 1;
    size_t off = 0;
    while (off < sizes[i]) {
      ssize_t n = write(fd, values[i] + off, sizes[i] - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) { failed = 1; break; }
      off += (size_t)n;
    }
    if (!failed && fchmod(fd, 0440) != 0) failed = 1;
    if (close(fd) != 0) failed = 1;
  }
  memset(input, 0, len);
  if (failed) {
    for (int i = 0; i < written; i++) unlinkat(dfd, names[i], 0);
    return refuse(strerror(errno));
  }
  close(dfd);
  return 0;
}

/* The token the host wrote to our stdin: exactly TOKEN_HEX hex digits and a newline. */
static void read_token(char *token) {
  size_t got = 0;
  char c;
  for (;;) {
    ssize_t n = read(0, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n != 1) break;
    if (c == '\n') break;
    if (got == TOKEN_HEX || !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) _exit(64);
    token[got++] = c;
  }
  if (got != TOKEN_HEX) {
    dprintf(2, "cairn-agent: no token on stdin\n");
    _exit(64);
  }
  /* Nothing run later may read what else comes on this stdin. */
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0 || dup2(null_fd, 0) < 0) die("stdin");
  close(null_fd);
}

int main(int argc, char **argv) {
  prctl(PR_SET_DUMPABLE, 0);
  if (argc >= 2 && strcmp(argv[1], "--measure") == 0) return measure(argc - 2, argv + 2);
  if (argc == 3 && strcmp(argv[1], "--put-secrets") == 0) return put_secrets(argv[2]);
  if (argc != 3) {
    dprintf(2, "usage: cairn-agent <socket-path> <lifetime-seconds>\n");
    return 64;
  }
  long lifetime = parse_count(argv[2]);
  if (lifetime > 0) alarm((unsigned)(lifetime > 0x7fffffff ? 0x7fffffff : lifetime)); /* SIGALRM ends it, like sleep */

  char token[TOKEN_HEX];
  read_token(token);

  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(argv[1]) >= sizeof addr.sun_path) {
    dprintf(2, "cairn-agent: socket path too long\n");
    return 64;
  }
  strcpy(addr.sun_path, argv[1]);
  sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) die("socket");
  if (connect(sock, (struct sockaddr *)&addr, sizeof addr) < 0) die("connect");

  /* SIGCHLD through a signalfd, so one poll sees output, input and exits alike. */
  sigset_t mask, old_mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &mask, &old_mask) < 0) die("sigprocmask");
  int sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sigfd < 0) die("signalfd");
  signal(SIGPIPE, SIG_IGN);

  send_text('H', "cairn-agent/2");
  send_frame('A', token, TOKEN_HEX);
  memset(token, 0, sizeof token);
  for (;;) {
    char type;
    uint32_t len;
    char *payload = read_frame(&type, &len);
    if (type == 'K') { /* a kill that came after its command had ended */
      free(payload);
      continue;
    }
    if (type != 'X') _exit(73);
    run_command(payload, len, sigfd, &old_mask);
    free(payload);
  }
}
