/* locale_ctor: a library whose constructor calls newlocale(), as
 * libp11-kit's does in curl and wget: newlocale holds glibc's locale lock
 * while it allocates, so the process's first malloc may come from inside it. */
#include <locale.h>

static locale_t made;

__attribute__((constructor)) static void make_locale(void) {
  made = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}
