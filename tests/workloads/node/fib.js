// A hot JavaScript function for V8's JIT: fib, for the given milliseconds
// of wall time (argv[2], default 1500).
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
const ms = Number(process.argv[2] || 1500);
const t = Date.now();
let s = 0;
while (Date.now() - t < ms) s += fib(25);
console.log("fib: done", s > 0);
