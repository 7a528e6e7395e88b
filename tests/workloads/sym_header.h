// sym_header.h: a hot function defined in a header that sym_header.c
// includes by a relative name, so that its DWARF file name is relative to the
// compilation directory ("./sym_header.h" when compiled from this directory).
static volatile unsigned long header_sink;

static unsigned long header_spin(unsigned long n) {
  unsigned long x = header_sink;
  for (unsigned long i = 0; i < n; i++) { x = x * 6364136223846793005UL + i; header_sink = x; }  // SYM_HEADER_LOOP
  return x;
}
