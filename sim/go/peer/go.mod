module mcpsim.test/peer

go 1.25
