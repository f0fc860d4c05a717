/* net.h — the guest's NIC for an egress allowlist (vm/net.c). */
#ifndef SBX_VM_NET_H
#define SBX_VM_NET_H

/* Configures eth0 and /etc/resolv.conf from the kernel command line when
 * it names an address (sbx.ip4); 0 when done or when there is no NIC to
 * configure, -1 (said on stderr) when the NIC could not take its IPv4
 * address: the guest then must not serve (its network is not the one the
 * host's rules expect). */
int sbx_vm_net_config(void);

#endif
