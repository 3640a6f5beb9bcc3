package rpc

// Watches returns the number of health Watch streams open, for tests.
func (s *Server) Watches() int {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	n := 0
	for _, c := range s.watches {
		n += c
	}
	return n
}
