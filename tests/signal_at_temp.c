/* Fault injection for the tests (tests/signal_at_temp.py), loaded with LD_PRELOAD: the Nth
 * temporary file or folder the process makes (mkstemp, mkstemps, mkdtemp; N in
 * $SIGNAL_AT_TEMP) is followed at once by the signal $SIGNAL_NUMBER, raised on the thread that
 * made it. So a test can stop a run in the one moment a temporary is made and not yet
 * registered for the cleanup, which a timed signal hits once in thousands of runs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

static atomic_int made;

static void after_one_made(void) {
    const char* at = getenv("SIGNAL_AT_TEMP");
    const char* number = getenv("SIGNAL_NUMBER");
    if (at && atoi(at) == atomic_fetch_add(&made, 1) + 1) raise(number ? atoi(number) : SIGTERM);
}

int mkstemp(char* pattern) {
    int (*real)(char*) = (int (*)(char*))dlsym(RTLD_NEXT, "mkstemp");
    const int fd = real(pattern);
    after_one_made();
    return fd;
}

int mkstemps(char* pattern, int suffix) {
    int (*real)(char*, int) = (int (*)(char*, int))dlsym(RTLD_NEXT, "mkstemps");
    const int fd = real(pattern, suffix);
    after_one_made();
    return fd;
}

char* mkdtemp(char* pattern) {
    char* (*real)(char*) = (char* (*)(char*))dlsym(RTLD_NEXT, "mkdtemp");
    char* made_folder = real(pattern);
    after_one_made();
    return made_folder;
}
