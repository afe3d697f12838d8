// Library placeholder; see the files beside it.
