// rs_prog: CPU in a generic function, a non-generic one and two trait
// methods (one for an instance of a generic type, one for a plain type),
// each kept out of line. tests/integration/test_rust.py builds it once with
// each of rustc's manglings and reads the names its profiles give them.
//
//   rs_prog [ROUNDS]   (default 100, about 0.6 s of CPU; prints a checksum of ROUNDS alone)

// std::hint::black_box is newer than Debian 12's rustc (1.63): a volatile
// read keeps the optimizer from folding the loops away the same way, inside
// the function that calls it.
#[inline(always)]
fn black_box<T: Copy>(x: T) -> T {
    unsafe { std::ptr::read_volatile(&x) }
}

pub trait Spin {
    fn spin(&self, n: u64) -> u64;
}

pub struct Mixer<T> {
    seed: T,
}

pub struct Plain {
    seed: u64,
}

impl<T: Copy + Into<u64>> Spin for Mixer<T> {
    #[inline(never)]
    fn spin(&self, n: u64) -> u64 {
        let mut x: u64 = self.seed.into();
        for i in 0..n {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
        x
    }
}

impl Spin for Plain {
    #[inline(never)]
    fn spin(&self, n: u64) -> u64 {
        let mut x = self.seed;
        for i in 0..n {
            x = black_box(x.rotate_left(5) ^ i.wrapping_mul(0x9e3779b97f4a7c15));
        }
        x
    }
}

#[inline(never)]
fn burn<T: Copy + Into<u64>>(v: T, n: u64) -> u64 {
    let mut x: u64 = v.into();
    for i in 0..n {
        x = black_box(x ^ (x << 13) ^ (x >> 7) ^ i);
    }
    x
}

#[inline(never)]
fn churn(seed: u64, n: u64) -> u64 {
    let mut x = seed;
    for i in 0..n {
        x = black_box(x.wrapping_add(i).wrapping_mul(0xff51afd7ed558ccd) >> 3);
    }
    x
}

fn main() {
    let rounds: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100);
    let mixer = Mixer { seed: 7u32 };
    let plain = Plain { seed: 11 };
    let spinners: [&dyn Spin; 2] = [&mixer, &plain];
    let mut acc = 0u64;
    for r in 0..rounds {
        acc ^= burn(black_box(3u32), 1_000_000);
        acc ^= churn(black_box(r), 1_000_000);
        for s in black_box(spinners) {
            acc ^= s.spin(1_000_000);
        }
    }
    println!("rs_prog: {}", acc);
}
