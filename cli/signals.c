/* The ending signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT) go to the tool's
 * main thread. The library's atomic writer holds them back on the thread
 * that writes while its temporary file exists, so that an interrupted
 * write leaves none; but a process-directed signal is delivered to any
 * thread that does not block it, and the tool has others (OpenBLAS's
 * workers, started before main). So each such thread passes the signal on
 * to the main thread, where it waits while a write is in progress and then
 * ends the process as the default action would. */
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "cli.h"

static pthread_t main_thread; /* set once, before any handler runs */

static void on_ending_signal(int sig) {
  if (!pthread_equal(pthread_self(), main_thread)) {
    pthread_kill(main_thread, sig); /* pending there while it writes */
    return;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void cli_signals_init(void) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  main_thread = pthread_self();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_ending_signal;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
    struct sigaction old;
    /* a signal the caller ignores (nohup, a shell's background job) stays
     * ignored */
    if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
      sigaction(sigs[i], &sa, NULL);
  }
}
