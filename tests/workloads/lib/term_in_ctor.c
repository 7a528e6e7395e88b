/* A library whose constructor raises SIGTERM: it runs inside dlopen, under
 * the loader's frames and lock, where the shim never stops (a stop needs
 * the loader): the signal is deferred every time, and taken again once
 * dlopen has returned. */
#include <signal.h>

__attribute__((constructor)) static void raise_term(void) { raise(SIGTERM); }
