// Micro-benchmarks of the pure core, each printed side by side with its baseline.
print("HeraldBenchmarks: no benchmarks yet")
