package main

import "github.com/netctl/netctl/macvtap"

func linkUp(name string) error { return macvtap.LinkUp(name) }
