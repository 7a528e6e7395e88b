// httphash: a cgo program (it imports "C", so its threads are glibc's and
// the runtime gives each an alternate signal stack) whose goroutines are
// busy: 8 workers fetch from an in-process HTTP server on 127.0.0.1 and
// hash what they get with SHA-256 (and mix a number in C, through cgo,
// about a third of the CPU), while 64 MiB allocated with C.malloc stay
// held. The output depends on the rounds alone: one line per worker, its
// last digest. Then it ends as HOW says:
//
//	return  main.main returns (exit_group(0), no libc exit)
//	exit3   os.Exit(3)
//	panic   an unrecovered panic (status 2)
//	fatal   log.Fatal (status 1)
//	term    SIGTERM to itself, with Go's default handling (death by it)
//	notify  SIGTERM to itself, taken by signal.Notify; then main returns
//	spawn   os/exec runs /bin/sh -c true 5 times; then main returns
//	nil     8 goroutines each dereference a nil pointer 50 times and
//	        recover from the panic (Go's SIGSEGV handler makes it one);
//	        then main returns
//	quit    a C thread mallocs and frees without pause; SIGQUIT goes to it,
//	        and Go's handler, there, ends the process (status 2)
//
//	httphash [ROUNDS [HOW]]   (ROUNDS default 200, HOW default return)
package main

// #include <stdlib.h>
// #include <string.h>
// static int answer(void) { return 42; }
// __attribute__((noinline)) static unsigned long mix(unsigned long x, long n) {
//   for (long i = 0; i < n; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
//   return x;
// }
// static void* hold(size_t n) { void* p = malloc(n); if (p) memset(p, 1, n); return p; }
// #include <sys/syscall.h>
// #include <unistd.h>
// static volatile long churn_tid;
// static void churn(void) {
//   static void* keep[4096];
//   unsigned long x = 1;
//   churn_tid = syscall(SYS_gettid);
//   for (;;) {
//     x = x * 6364136223846793005ul + 1;
//     unsigned i = (x >> 33) % 4096;
//     free(keep[i]);
//     keep[i] = malloc(16 + (x >> 50) % 2000);
//   }
// }
// static long churner(void) { return churn_tid; }
import "C"

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

const workers = 8

func main() {
	rounds := 200
	if len(os.Args) > 1 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil || n <= 0 {
			fmt.Fprintln(os.Stderr, "httphash: ROUNDS must be a positive number")
			os.Exit(2)
		}
		rounds = n
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "httphash:", err)
		os.Exit(1)
	}
	body := make([]byte, 64<<10)
	for i := range body {
		body[i] = byte(i * 7)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(body)
	})}
	go srv.Serve(ln)
	url := "http://" + ln.Addr().String() + "/"

	digests := make([]string, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			client := &http.Client{}
			sum := sha256.Sum256([]byte{byte(w)})
			for r := 0; r < rounds; r++ {
				resp, err := client.Get(url)
				if err != nil {
					fmt.Fprintln(os.Stderr, "httphash:", err)
					os.Exit(1)
				}
				data, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					fmt.Fprintln(os.Stderr, "httphash:", err)
					os.Exit(1)
				}
				// Hashing dominates: the CPU is the goroutines', on their stacks.
				for k := 0; k < 8; k++ {
					h := sha256.New()
					h.Write(sum[:])
					h.Write(data)
					copy(sum[:], h.Sum(nil))
				}
				sum[0] ^= byte(C.mix(C.ulong(sum[1]), 600000))
			}
			digests[w] = hex.EncodeToString(sum[:])
		}(w)
	}
	wg.Wait()
	for w, d := range digests {
		fmt.Printf("worker %d %s\n", w, d)
	}
	fmt.Printf("cgo %d\n", int(C.answer()))
	held := C.hold(64 << 20)
	// The truth a profile is judged by: the process's own CPU so far.
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Fprintf(os.Stderr, "httphash: cpu_us %d\n", ru.Utime.Nano()/1000+ru.Stime.Nano()/1000)
	how := "return"
	if len(os.Args) > 2 {
		how = os.Args[2]
	}
	switch how {
	case "exit3":
		os.Exit(3)
	case "panic":
		panic("httphash: asked to panic")
	case "fatal":
		log.Fatal("httphash: asked to fail")
	case "term":
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(10 * time.Second)
		fmt.Println("SIGTERM did not end the process")
	case "quit":
		go C.churn()
		for C.churner() == 0 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		syscall.Tgkill(os.Getpid(), int(C.churner()), syscall.SIGQUIT)
		time.Sleep(10 * time.Second)
		fmt.Println("SIGQUIT did not end the process")
	case "spawn":
		for i := 0; i < 5; i++ {
			if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
				fmt.Println("spawn:", err)
			}
		}
		fmt.Println("spawned 5")
	case "nil":
		fmt.Println("recovered", nilPanics(8, 50))
	case "notify":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
		fmt.Println("took", <-ch)
	}
	if held == nil {
		fmt.Println("C.malloc failed")
	}
}

type cell struct{ x int }

//go:noinline
func deref(p *cell) int { return p.x }

// nilPanics: goroutines (on the runtime's threads, which it starts with
// every signal blocked and then unblocks with its own system call) that
// fault on a nil pointer and recover; how many recovered.
func nilPanics(goroutines, each int) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	recovered := 0
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				func() {
					defer func() {
						if recover() != nil {
							mu.Lock()
							recovered++
							mu.Unlock()
						}
					}()
					deref(nil)
				}()
			}
		}()
	}
	wg.Wait()
	return recovered
}
