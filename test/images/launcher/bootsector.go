package launcher

// BootSector is a 512-byte MBR boot sector that writes msg to the first
// serial port (COM1, 0x3f8) and halts: a guest SeaBIOS boots in well
// under a second, for tests of what runs guests.
func BootSector(msg string) []byte {
	code := []byte{
		0xBA, 0xF8, 0x03, // mov dx, 0x3f8
		0xBE, 0x11, 0x7C, // mov si, 0x7c11 (msg, after this code)
		0xAC,       // loop: lodsb
		0x84, 0xC0, // test al, al
		0x74, 0x03, // jz done
		0xEE,       // out dx, al
		0xEB, 0xF8, // jmp loop
		0xF4,       // done: hlt
		0xEB, 0xFD, // jmp done
	}
	sector := make([]byte, 512)
	copy(sector, code)
	copy(sector[len(code):len(sector)-2], msg+"\x00")
	sector[510], sector[511] = 0x55, 0xAA
	return sector
}
