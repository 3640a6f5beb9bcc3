// Package deploy holds no code: its tests check the deployment files at the
// repository's root (docker-compose.yml, with the Compose specification's
// own loader). They live in a package of their own so that the loader,
// github.com/compose-spec/compose-go/v2, is a dependency of these tests
// only and never of the leafd binary.
package deploy
