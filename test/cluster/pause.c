/* The pause program of the test node's pod sandboxes (containerd's sandbox_image): holds the pod's
 * namespaces open by sleeping until SIGTERM or SIGINT, then exits 0; as the pod's init process it
 * reaps every child that exits (SIGCHLD). Built static (gcc -static) into a single-layer image by
 * test/cluster/images.ts. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_stop(int sig) {
  (void)sig;
  stop = 1;
}

static void on_child(int sig) {
  (void)sig;
  int saved = errno;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

static int handle(int sig, void (*fn)(int), int flags) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  if (sigaction(sig, &sa, NULL) != 0) {
    perror("pause: sigaction");
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("pause (predictgate test node)");
    return 0;
  }
  if (handle(SIGINT, on_stop, 0) || handle(SIGTERM, on_stop, 0) || handle(SIGCHLD, on_child, SA_NOCLDSTOP | SA_RESTART)) return 1;
  /* Block the stop signals between the check and pause(), so a signal cannot slip in between them. */
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGCHLD);
  sigprocmask(SIG_BLOCK, &block, &old);
  while (!stop) sigsuspend(&old);
  return 0;
}
