package directory

// Test access to internals.

type (
	Verdict     = verdict
	OpKind      = opKind
	ModelRecord = modelRecord
	ModelOp     = modelOp
)

const (
	VOK       = vOK
	VExists   = vExists
	VNotFound = vNotFound
	VFenced   = vFenced
	VOwned    = vOwned

	OpClaim    = opClaim
	OpUpdate   = opUpdate
	OpTakeover = opTakeover
	OpRelease  = opRelease
	OpDelete   = opDelete
)

var Decide = decide

// Seal and Open expose the token encryption.
func (kr *KeyRing) Seal(sessionID, token string) string { return kr.seal(sessionID, token) }
func (kr *KeyRing) Open(sessionID, sealed string) (string, error) {
	return kr.open(sessionID, sealed)
}

// SessionKey and LeaseKey are the Redis keys this directory uses.
func (d *Directory) SessionKey(id string) string     { return d.sessKey(id) }
func (d *Directory) LeaseKey(instance string) string { return d.leasePrefix + instance }
func (d *Directory) Keys() *KeyRing                  { return d.keys }

// RegistryKey is the key of the registry of replicas.
func (d *Directory) RegistryKey() string { return d.registryKey }
