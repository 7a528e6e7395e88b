/* locale_main: linked with locale_ctor (--no-as-needed: it uses none of its
 * symbols); takes glibc's locale lock twice
 * more (setlocale), which hung when the lock's count was left wrong. */
#include <locale.h>
#include <stdio.h>

int main(void) {
  const char* a = setlocale(LC_ALL, "");
  const char* b = setlocale(LC_CTYPE, "C");
  printf("locales %s %s\n", a ? "set" : "refused", b ? b : "refused");
  return 0;
}
