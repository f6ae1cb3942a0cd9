// Package hpcc owns finegrain's two formats of the HPC Challenge benchmark (HPCC 1.5.0): the
// summary section HPCC appends to hpccoutf.txt after each run, which Parse reads into Summaries
// whose Headline gives the fine-grained scheduling paper's figures (EP-DGEMM, EP-STREAM,
// G-RandomRing, G-FFT), and the hpccinf.txt input file, which Size computes for a job's task
// count and memory and Input writes and reads back. It only converts between bytes and values:
// it must not run HPCC, start MPI or talk to Kubernetes (the tests run a real HPCC when one is
// installed).
package hpcc
