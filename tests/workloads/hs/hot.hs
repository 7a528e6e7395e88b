-- hot: CPU in named Haskell functions, for tests/integration/test_ghc.py.
-- fib is strict arithmetic (GHC makes it a worker, $wfib, that allocates
-- nothing); textLen spends its time in the libraries (base's show, the
-- text package's concat). Both are exported: GHC gives a module's other
-- functions no symbol at all.
module Main (main, fib, textLen) where

import qualified Data.Text as T
import System.Environment (getArgs)

fib :: Int -> Int
fib n = if n < 2 then n else fib (n - 1) + fib (n - 2)
{-# NOINLINE fib #-}

textLen :: Int -> Int
textLen k = T.length (T.concat [ T.pack (show i) | i <- [1 .. k] ])
{-# NOINLINE textLen #-}

main :: IO ()
main = do
  args <- getArgs
  let n = case args of (a:_) -> read a; _ -> 32
  -- Each call's argument differs, or GHC computes it once.
  print (sum [ fib (n + i `mod` 2) | i <- [0 .. 3] ])
  print (sum [ textLen (100000 + i) | i <- [1 .. n `div` 4] ])
