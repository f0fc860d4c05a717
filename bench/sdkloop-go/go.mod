module sandboxd.invalid/bench/sdkloop

go 1.19

require github.com/sandboxd/sandboxd/sdk/go v0.1.0

replace github.com/sandboxd/sandboxd/sdk/go => ../../sdk/go
