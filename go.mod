module github.com/lbpack/lbpack

go 1.26.0
