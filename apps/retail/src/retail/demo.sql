-- Demo data for the retail graphs (`mostrador seed`, `mostrador dev --demo-data`): four stores of
-- an outdoor-sports chain, its catalogue, stock in every store, and orders of two customers
-- (`ana`, of madrid-centro, and `luis`, of barcelona-gracia). Loading it again changes nothing.

insert into retail.stores (store_id, name, city, address, opening_hours, phone) values
    ('madrid-centro', 'Madrid Centro', 'Madrid', 'Calle de Preciados 12', 'L-S 10:00-21:00, D 11:00-20:00', '+34 910 000 101'),
    ('madrid-norte', 'Madrid Norte', 'Madrid', 'Avenida de la Ilustración 5', 'L-S 10:00-22:00', '+34 910 000 102'),
    ('barcelona-gracia', 'Barcelona Gràcia', 'Barcelona', 'Carrer Gran de Gràcia 40', 'L-S 10:00-20:30', '+34 930 000 201'),
    ('valencia-ruzafa', 'Valencia Ruzafa', 'Valencia', 'Carrer de Sueca 18', 'L-S 09:30-21:00', '+34 960 000 301')
on conflict do nothing;

insert into retail.products (product_id, name, category, brand, price, pack_size, attributes) values
    ('ZAP-TRAIL-42', 'Zapatillas de trail Cumbre 42', 'calzado', 'Cumbre', 89.90, 6,
     '{"talla": "42", "drop": "6 mm", "peso": "310 g", "suela": "Vibram Megagrip", "uso": "para correr por montaña", "cuidados": "Lavar a mano con agua fría; secar a la sombra."}'),
    ('ZAP-TRAIL-43', 'Zapatillas de trail Cumbre 43', 'calzado', 'Cumbre', 89.90, 6,
     '{"talla": "43", "drop": "6 mm", "peso": "320 g", "suela": "Vibram Megagrip", "uso": "para correr por montaña", "cuidados": "Lavar a mano con agua fría; secar a la sombra."}'),
    ('ZAP-RUN-41', 'Zapatillas de running Asfalto 41', 'calzado', 'Asfalto', 74.95, 6,
     '{"talla": "41", "drop": "8 mm", "peso": "260 g", "uso": "para rodajes en asfalto", "cuidados": "No meter en la lavadora."}'),
    ('CHQ-PLUMA-M', 'Chaqueta de plumas Norte M', 'ropa', 'Norte', 129.00, 4,
     '{"talla": "M", "relleno": "plumón 90/10", "peso": "380 g", "uso": "para el frío seco", "cuidados": "Lavadora a 30 °C con jabón para plumas; secadora suave."}'),
    ('CHQ-PLUMA-L', 'Chaqueta de plumas Norte L', 'ropa', 'Norte', 129.00, 4,
     '{"talla": "L", "relleno": "plumón 90/10", "peso": "410 g", "uso": "para el frío seco", "cuidados": "Lavadora a 30 °C con jabón para plumas; secadora suave."}'),
    ('CAM-TEC-M', 'Camiseta técnica Brisa M', 'ropa', 'Brisa', 19.95, 12,
     '{"talla": "M", "tejido": "poliéster reciclado", "uso": "para entrenar con calor", "cuidados": "Lavadora a 30 °C; no planchar."}'),
    ('CALC-MER', 'Calcetines de merino Senda', 'ropa', 'Senda', 12.90, 12,
     '{"tejido": "lana merino 60 %", "uso": "para caminar todo el día", "cuidados": "Lavadora a 30 °C del revés."}'),
    ('MOCH-25', 'Mochila Ruta 25 L', 'accesorios', 'Ruta', 49.90, 4,
     '{"capacidad": "25 L", "peso": "720 g", "uso": "para excursiones de un día", "cuidados": "Limpiar con un paño húmedo."}'),
    ('BAST-CARB', 'Bastones de carbono Cresta', 'accesorios', 'Cresta', 69.00, 4,
     '{"material": "carbono", "longitud": "105-135 cm", "uso": "para travesías largas", "cuidados": "Secar los tramos antes de plegarlos."}'),
    ('BOT-ACERO', 'Botella de acero Fuente 750 ml', 'accesorios', 'Fuente', 14.90, 12,
     '{"capacidad": "750 ml", "material": "acero inoxidable", "uso": "para llevar agua fría o caliente", "cuidados": "Lavar a mano."}'),
    ('TIENDA-2P', 'Tienda de campaña Refugio 2 plazas', 'camping', 'Refugio', 159.00, 2,
     '{"plazas": "2", "peso": "2,1 kg", "columna de agua": "3000 mm", "uso": "para acampar en tres estaciones", "cuidados": "Guardar seca; no lavar a máquina."}'),
    ('SACO-5', 'Saco de dormir Vivac 5 °C', 'camping', 'Vivac', 79.00, 4,
     '{"temperatura de confort": "5 °C", "peso": "1,1 kg", "uso": "para noches de primavera y verano", "cuidados": "Lavar a mano; secar extendido."}'),
    ('FRONT-300', 'Linterna frontal Luz 300', 'electrónica', 'Luz', 29.90, 10,
     '{"potencia": "300 lúmenes", "batería": "recargable USB-C", "uso": "para salir de noche", "cuidados": "Cargar cada tres meses si no se usa."}'),
    ('GPS-RELOJ', 'Reloj GPS Pulso', 'electrónica', 'Pulso', 199.00, 2,
     '{"autonomía": "14 días", "sensores": "GPS, pulso, barómetro", "uso": "para entrenar y orientarse", "cuidados": "Enjuagar tras usarlo en el mar."}')
on conflict do nothing;

insert into retail.return_policies (category, days, conditions) values
    ('calzado', 30, 'Sin usar en exterior, con su caja.'),
    ('ropa', 30, 'Con etiquetas.'),
    ('accesorios', 30, 'Sin usar.'),
    ('camping', 15, 'Sin montar o en perfecto estado.'),
    ('electrónica', 15, 'Con su embalaje y sin daños.')
on conflict do nothing;

-- Stock: the trail shoes in 42 are sold out in Madrid Centro (the assistant points to Madrid
-- Norte); the rest is spread from a hash so that some references fall below their reorder point.
insert into retail.stock (store_id, product_id, quantity, reorder_point) values
    ('madrid-centro', 'ZAP-TRAIL-42', 0, 6),
    ('madrid-norte', 'ZAP-TRAIL-42', 7, 6)
on conflict do nothing;

insert into retail.stock (store_id, product_id, quantity, reorder_point)
select s.store_id, p.product_id, abs(hashtext(s.store_id || '/' || p.product_id)) % 30, 10
from retail.stores s cross join retail.products p
on conflict do nothing;

insert into retail.orders (order_id, customer, store_id, placed_at, delivered_at, total) values
    ('PED-1001', 'ana', 'madrid-centro', now() - interval '12 days', now() - interval '10 days', 115.70),
    ('PED-1002', 'ana', 'madrid-centro', now() - interval '65 days', now() - interval '60 days', 129.00),
    ('PED-1003', 'luis', 'barcelona-gracia', now() - interval '5 days', now() - interval '3 days', 199.00),
    ('PED-1004', 'ana', 'madrid-centro', now() - interval '1 day', null, 49.90)
on conflict do nothing;

insert into retail.order_lines (order_id, line, product_id, quantity, unit_price) values
    ('PED-1001', 1, 'ZAP-TRAIL-42', 1, 89.90),
    ('PED-1001', 2, 'CALC-MER', 2, 12.90),
    ('PED-1002', 1, 'CHQ-PLUMA-M', 1, 129.00),
    ('PED-1003', 1, 'GPS-RELOJ', 1, 199.00),
    ('PED-1004', 1, 'MOCH-25', 1, 49.90)
on conflict do nothing;
