module plabel.example/bench/shares

go 1.19
