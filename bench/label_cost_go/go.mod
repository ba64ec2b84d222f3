module plabel/bench/labelcost

go 1.19
