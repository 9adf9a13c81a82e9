module github.com/lbpack/lbpack/yaegitest

go 1.26.0

require (
	github.com/lbpack/lbpack v0.0.0-00010101000000-000000000000
	github.com/mitchellh/mapstructure v1.5.1-0.20231216201459-8508981c8b6c
	github.com/traefik/yaegi v0.16.1
	gopkg.in/yaml.v3 v3.0.1
)

replace github.com/lbpack/lbpack => ../
