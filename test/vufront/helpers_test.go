package vufront

import "github.com/netctl/netctl/vhostnet/guest"

func guestQueue(num uint16) guest.QueueConfig { return guest.QueueConfig{Num: num} }
